// What Swift cannot call in libmicrohttpd: MHD_start_daemon and MHD_get_connection_info are
// variadic, and MHD's logger takes a va_list. HTTPServer (Swift) is the only user; everything else it calls directly.
#ifndef MHD_SHIM_H
#define MHD_SHIM_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>

/// The options viewerd-http starts a daemon with, a fixed struct instead of MHD_start_daemon's
/// variadic list (0 leaves a number at MHD's default).
struct vd_mhd_options {
    int listen_fd;                       // MHD_OPTION_LISTEN_SOCKET (bound and listening)
    unsigned int threads;                // MHD_OPTION_THREAD_POOL_SIZE
    unsigned int connection_limit;       // MHD_OPTION_CONNECTION_LIMIT
    unsigned int per_address_limit;      // MHD_OPTION_PER_IP_CONNECTION_LIMIT
    size_t memory_limit;                 // MHD_OPTION_CONNECTION_MEMORY_LIMIT: header bytes and buffers
    unsigned int timeout_seconds;        // MHD_OPTION_CONNECTION_TIMEOUT: idle (reset on each byte)
    MHD_AccessHandlerCallback handler;
    void *context;                       // given to every callback
    MHD_AcceptPolicyCallback accept_policy;
    MHD_RequestCompletedCallback completed;      // MHD_OPTION_NOTIFY_COMPLETED
    MHD_NotifyConnectionCallback connection;     // MHD_OPTION_NOTIFY_CONNECTION
    void *(*uri_log)(void *context, const char *uri, struct MHD_Connection *connection);
    void (*log)(void *context, const char *message);   // MHD's error messages, formatted
};

/// MHD_start_daemon with an internal epoll thread pool, suspend/resume (and so an inter-thread
/// channel), no unescaping of the URL (the rules see it percent-encoded, as
/// sent). NULL when MHD refuses.
struct MHD_Daemon *vd_mhd_start(const struct vd_mhd_options *options);

/// The connection's descriptor, or -1.
int vd_mhd_connection_fd(struct MHD_Connection *connection);

/// The client's address (its length in *length), or NULL.
const struct sockaddr *vd_mhd_client_address(struct MHD_Connection *connection);

/// The pointer MHD_NotifyConnectionCallback set in *socket_context, or NULL.
void *vd_mhd_socket_context(struct MHD_Connection *connection);

#endif
