// See include/sandbox.h.
#define _GNU_SOURCE
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <time.h>

vd_filter *vd_filter_new(void) { return (vd_filter *)seccomp_init(SCMP_ACT_KILL_PROCESS); }

void vd_filter_free(vd_filter *filter) { seccomp_release((scmp_filter_ctx)filter); }

int vd_filter_add(vd_filter *filter, const char *name, int errno_value, const vd_condition *conditions, int count) {
    int syscall = seccomp_syscall_resolve_name(name);
    if (syscall == __NR_SCMP_ERROR) return 1;
    if (count < 0 || count > 6) return -EINVAL;
    uint32_t action = errno_value > 0 ? SCMP_ACT_ERRNO((uint32_t)errno_value)
                      : errno_value < 0 ? SCMP_ACT_NOTIFY : SCMP_ACT_ALLOW;
    struct scmp_arg_cmp comparisons[6];
    for (int i = 0; i < count; i++) {
        const vd_condition *c = &conditions[i];
        switch (c->op) {
        case VD_ARG_EQ: comparisons[i] = SCMP_CMP(c->arg, SCMP_CMP_EQ, c->value); break;
        case VD_ARG_MASKED_EQ: comparisons[i] = SCMP_CMP(c->arg, SCMP_CMP_MASKED_EQ, c->mask, c->value); break;
        case VD_ARG_GE: comparisons[i] = SCMP_CMP(c->arg, SCMP_CMP_GE, c->value); break;
        default: return -EINVAL;
        }
    }
    return seccomp_rule_add_array((scmp_filter_ctx)filter, action, syscall, (unsigned)count, comparisons);
}

int vd_filter_load(vd_filter *filter) {
    scmp_filter_ctx ctx = (scmp_filter_ctx)filter;
    // Every thread: libvips or GLib may have started one before the filter goes on.
    int rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1);
    if (rc != 0) return rc;
    return seccomp_load(ctx);
}

int vd_filter_notify_fd(vd_filter *filter) { return seccomp_notify_fd((scmp_filter_ctx)filter); }

int vd_set_dumpable(int dumpable) { return prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0); }

/// Copies the NUL-terminated string at `address` in process `pid` into `out` (page by page:
/// a string may end just before an unmapped page). Returns its length, or -1 with errno.
static int read_remote_string(pid_t pid, uint64_t address, char *out, size_t capacity) {
    size_t done = 0;
    long page = sysconf(_SC_PAGESIZE);
    while (done + 1 < capacity) {
        uint64_t at = address + done;
        size_t chunk = (size_t)(page - (long)(at % (uint64_t)page));
        if (chunk > capacity - 1 - done) chunk = capacity - 1 - done;
        struct iovec local = {.iov_base = out + done, .iov_len = chunk};
        struct iovec remote = {.iov_base = (void *)(uintptr_t)at, .iov_len = chunk};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n <= 0) return -1;
        void *nul = memchr(out + done, 0, (size_t)n);
        if (nul != NULL) return (int)((char *)nul - out);
        done += (size_t)n;
    }
    errno = ENAMETOOLONG;
    return -1;
}

int vd_notify_receive(int notify_fd, vd_open_request *request, char *path, char *base) {
    struct seccomp_notif *notif = NULL;
    struct seccomp_notif_resp *resp = NULL;
    if (seccomp_notify_alloc(&notif, &resp) != 0) return -ENOMEM;
    seccomp_notify_free(NULL, resp);
    int rc;
    do {
        rc = seccomp_notify_receive(notify_fd, notif);
    } while (rc == -EINTR);
    if (rc != 0) {
        seccomp_notify_free(notif, NULL);
        return rc;
    }
    request->id = notif->id;
    request->pid = (int)notif->pid;
    request->dirfd = -100;  // AT_FDCWD
    uint64_t address;
#ifdef __NR_open
    if (notif->data.nr == __NR_open) {
        address = notif->data.args[0];
    } else
#endif
    {
        request->dirfd = (int)notif->data.args[0];
        address = notif->data.args[1];
    }
    request->read_errno = 0;
    if (read_remote_string((pid_t)notif->pid, address, path, VD_PATH_BUFFER) < 0) {
        request->read_errno = errno;
        path[0] = 0;
    }
    base[0] = 0;
    if (request->read_errno == 0 && path[0] != '/') {
        // A relative path: the kernel resolves it from the descriptor or the working directory.
        char link[64];
        if (request->dirfd == -100) {
            snprintf(link, sizeof link, "/proc/%d/cwd", (int)notif->pid);
        } else {
            snprintf(link, sizeof link, "/proc/%d/fd/%d", (int)notif->pid, request->dirfd);
        }
        ssize_t n = readlink(link, base, VD_PATH_BUFFER - 1);
        base[n > 0 ? n : 0] = 0;
    }
    seccomp_notify_free(notif, NULL);
    // The path was read from a thread that may have died meanwhile (and its pid be reused):
    // only a request still pending is answered from what was read.
    return seccomp_notify_id_valid(notify_fd, request->id);
}

int vd_notify_answer(int notify_fd, uint64_t id, int allow) {
    struct seccomp_notif_resp resp = {.id = id};
    if (allow) {
        resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    } else {
        resp.error = -EACCES;
    }
    int rc;
    do {
        rc = seccomp_notify_respond(notify_fd, &resp);
    } while (rc == -EINTR);
    return rc;
}

int vd_no_new_privs(void) { return prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); }

int vd_not_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int vd_set_limit(int resource, unsigned long long soft, unsigned long long hard) {
    struct rlimit limit = {.rlim_cur = soft, .rlim_max = hard};
    return setrlimit(resource, &limit);
}

int vd_unshare_network(void) { return unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC); }

int vd_landlock(const char *const *read_paths, int read_count, const char *const *exec_paths, int exec_count) {
    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) return -1;
    // Every file-system right of ABI 1 is handled, hence denied where no rule grants it.
    struct landlock_ruleset_attr attr = {
        .handled_access_fs = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_READ_FILE |
                             LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                             LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                             LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                             LANDLOCK_ACCESS_FS_MAKE_SYM,
    };
#ifdef LANDLOCK_ACCESS_FS_REFER
    if (abi >= 2) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_REFER;
#endif
#ifdef LANDLOCK_ACCESS_FS_TRUNCATE
    if (abi >= 3) attr.handled_access_fs |= LANDLOCK_ACCESS_FS_TRUNCATE;
#endif
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0);
    if (ruleset < 0) return -1;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *paths = pass == 0 ? read_paths : exec_paths;
        int count = pass == 0 ? read_count : exec_count;
        for (int i = 0; i < count; i++) {
            int fd = open(paths[i], O_PATH | O_CLOEXEC);
            if (fd < 0) continue;
            struct stat st;
            int is_dir = fstat(fd, &st) == 0 && S_ISDIR(st.st_mode);
            struct landlock_path_beneath_attr rule = {
                .allowed_access = LANDLOCK_ACCESS_FS_READ_FILE | (is_dir ? LANDLOCK_ACCESS_FS_READ_DIR : 0) |
                                  (pass == 1 ? LANDLOCK_ACCESS_FS_EXECUTE : 0),
                .parent_fd = fd,
            };
            int rc = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
            int saved = errno;
            close(fd);
            if (rc != 0) {
                close(ruleset);
                errno = saved;
                return -1;
            }
        }
    }
    int rc = (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
    int saved = errno;
    close(ruleset);
    errno = saved;
    return rc == 0 ? abi : -1;
}
