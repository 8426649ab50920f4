#include "mhd_shim.h"
#include <stdio.h>
#include <string.h>

/// One Swift function for every daemon's messages (they all log alike); set by vd_mhd_start.
static void (*log_function)(void *context, const char *message);

static void log_formatted(void *context, const char *format, va_list arguments) {
    char message[512];
    vsnprintf(message, sizeof message, format, arguments);
    void (*function)(void *, const char *) = __atomic_load_n(&log_function, __ATOMIC_ACQUIRE);
    if (function) function(context, message);
}

/// The URL is left as sent: an IIIF identifier is percent-encoded ("photos%2Fa.jpg") and the
/// rules decode it themselves, once, where they can refuse "%00" and "%2F..".
static size_t keep_escaped(void *cls, struct MHD_Connection *connection, char *s) {
    (void)cls;
    (void)connection;
    return strlen(s);
}

struct MHD_Daemon *vd_mhd_start(const struct vd_mhd_options *o) {
    unsigned int flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    __atomic_store_n(&log_function, o->log, __ATOMIC_RELEASE);
    // The logger first: MHD logs the options after it through it.
    return MHD_start_daemon(flags, 0, o->accept_policy, o->context, o->handler, o->context,
                            MHD_OPTION_EXTERNAL_LOGGER, log_formatted, o->context,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)o->listen_fd,
                            MHD_OPTION_THREAD_POOL_SIZE, o->threads > 1 ? o->threads : 1u,
                            MHD_OPTION_CONNECTION_LIMIT, o->connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, o->per_address_limit,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->memory_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, o->timeout_seconds,
                            MHD_OPTION_NOTIFY_COMPLETED, o->completed, o->context,
                            MHD_OPTION_NOTIFY_CONNECTION, o->connection, o->context,
                            MHD_OPTION_URI_LOG_CALLBACK, o->uri_log, o->context,
                            MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                            MHD_OPTION_END);
}

int vd_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? (int)info->connect_fd : -1;
}

const struct sockaddr *vd_mhd_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info ? info->client_addr : NULL;
}

void *vd_mhd_socket_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}
