#define _GNU_SOURCE
#include "cposix.h"

#include <errno.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ioctl.h>
#include <linux/sockios.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <malloc.h>
#include <poll.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/openat2.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

int vd_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

static int ctl(int epfd, int op, int fd, uint32_t events) {
    struct epoll_event ev;
    memset(&ev, 0, sizeof(ev));
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(epfd, op, fd, &ev);
}

int vd_epoll_add(int epfd, int fd, uint32_t events) { return ctl(epfd, EPOLL_CTL_ADD, fd, events); }
int vd_epoll_mod(int epfd, int fd, uint32_t events) { return ctl(epfd, EPOLL_CTL_MOD, fd, events); }
int vd_epoll_del(int epfd, int fd) { return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL); }

int vd_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms) {
    struct epoll_event evs[256];
    if (max > 256) max = 256;
    int n;
    do {
        n = epoll_wait(epfd, evs, max, timeout_ms);
    } while (n < 0 && errno == EINTR);
    for (int i = 0; i < n; i++) {
        fds[i] = evs[i].data.fd;
        events[i] = evs[i].events;
    }
    return n;
}

int vd_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

int vd_signalfd_for_termination(void) {
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    if (pthread_sigmask(SIG_BLOCK, &set, NULL) != 0) return -1;
    return signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
}

int vd_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof(info));
    return n == (ssize_t)sizeof(info) ? (int)info.ssi_signo : 0;
}

int vd_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid) {
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int vd_try_lock(int fd) { return flock(fd, LOCK_EX | LOCK_NB); }

#ifndef SYS_openat2
#define SYS_openat2 437  /* the same number on every architecture (the unified table) */
#endif

int vd_open_beneath(int root, const char *relative, int flags) {
    struct open_how how;
    memset(&how, 0, sizeof(how));
    how.flags = (uint64_t)(unsigned)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd;
    int attempts = 0;
    do {
        fd = syscall(SYS_openat2, root, relative, &how, sizeof(how));
        // EAGAIN: the kernel saw a rename race during a RESOLVE_BENEATH walk and asks for a
        // retry; a bounded number, so an attacker renaming in a loop cannot hold us here.
    } while (fd < 0 && (errno == EINTR || (errno == EAGAIN && ++attempts < 16)));
    return (int)fd;
}

int vd_accept(int fd) {
    int c;
    do {
        c = accept4(fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    } while (c < 0 && errno == EINTR);
    return c;
}

ssize_t vd_recv_with_fds(int fd, void *buf, size_t len, int *fds, int max_fds, int *nfds) {
    union {
        char bytes[CMSG_SPACE(sizeof(int) * 16)];
        struct cmsghdr align;
    } control;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = sizeof(control.bytes);
    *nfds = 0;
    ssize_t n;
    do {
        n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return n;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        int count = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        int *received = (int *)CMSG_DATA(c);
        for (int i = 0; i < count; i++) {
            // Keep what fits; close the rest rather than leak them.
            if (*nfds < max_fds) fds[(*nfds)++] = received[i];
            else close(received[i]);
        }
    }
    if (msg.msg_flags & MSG_CTRUNC) errno = 0;  // descriptors beyond our buffer were dropped by the kernel
    return n;
}

ssize_t vd_send_with_fd(int fd, const void *buf, size_t len, int passed_fd) {
    return vd_send_with_fds(fd, buf, len, &passed_fd, 1);
}

ssize_t vd_send_with_fds(int fd, const void *buf, size_t len, const int *passed, int count) {
    if (count < 1 || count > VD_MAX_PASSED_FDS) {
        errno = EINVAL;
        return -1;
    }
    union {
        char bytes[CMSG_SPACE(sizeof(int) * VD_MAX_PASSED_FDS)];
        struct cmsghdr align;
    } control;
    memset(&control, 0, sizeof(control));
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr msg;
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.bytes;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * count);
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    memcpy(CMSG_DATA(c), passed, sizeof(int) * count);
    ssize_t n;
    do {
        n = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } while (n < 0 && errno == EINTR);
    return n;
}

int vd_memfd_sealed(const char *name, const void *bytes, size_t len) {
    int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return -1;
    size_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, (const char *)bytes + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int saved = errno;
            close(fd);
            errno = saved ? saved : EIO;
            return -1;
        }
        done += (size_t)n;
    }
    // Sealed, the contents cannot change under the worker, whoever holds the descriptor.
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int vd_memfd_seals(int fd) { return fcntl(fd, F_GET_SEALS); }

void *vd_map_read_only(int fd, size_t len) {
    void *address = mmap(NULL, len, PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
    return address == MAP_FAILED ? NULL : address;
}

void vd_unmap(void *address, size_t len) { munmap(address, len); }

long vd_unread_sent(int fd) {
    int unread = 0;
    if (ioctl(fd, SIOCOUTQ, &unread) != 0) return -1;
    return unread;
}

long vd_unread_received(int fd) {
    int unread = 0;
    if (ioctl(fd, FIONREAD, &unread) != 0) return -1;
    return unread;
}

int vd_die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    // The parent may have died before the request: then nobody would send the signal.
    return getppid() == parent ? 0 : -1;
}

pid_t vd_spawn_worker(const char *exe, int sock, const char *const *args, char *const *envp) {
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, sock, 3);
    // Libraries open descriptors without close-on-exec (LMDB's data file): close everything
    // above the worker's channel, so a worker inherits nothing of the daemon's.
    posix_spawn_file_actions_addclosefrom_np(&actions, 4);
    // The daemon's standard input and output (a terminal, a log file) are not the worker's:
    // it writes its answers to its channel and its log lines to standard error only. After
    // closefrom: a daemon out of descriptors (EMFILE) still starts workers.
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    // The worker must not inherit the daemon's blocked signals: SIGTERM must end it.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    // Every argument: a fixed array once dropped the last ones silently (--parent, when
    // --nice came before it, and with it the worker's death with its daemon).
    size_t count = 0;
    while (args[count]) count++;
    char **argv = calloc(count + 3, sizeof(char *));
    if (!argv) {
        posix_spawn_file_actions_destroy(&actions);
        posix_spawnattr_destroy(&attr);
        errno = ENOMEM;
        return -1;
    }
    argv[0] = (char *)exe;
    argv[1] = "--worker";
    for (size_t i = 0; i < count; i++) argv[2 + i] = (char *)args[i];
    pid_t pid = -1;
    int rc = posix_spawn(&pid, exe, &actions, &attr, argv, envp);
    free(argv);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    return pid;
}

pid_t vd_wait(pid_t pid, int *status, int block) {
    pid_t r;
    do {
        r = waitpid(pid, status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    return r;
}

double vd_process_cpu_seconds(pid_t pid) {
    clockid_t clock;
    struct timespec t;
    if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &t) != 0) return -1;
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int vd_limit_address_space(unsigned long long bytes) {
    struct rlimit limit = {.rlim_cur = bytes, .rlim_max = bytes};
    return setrlimit(RLIMIT_AS, &limit);
}

int vd_poll2(int fd1, int fd2, int timeout_ms) {
    struct pollfd fds[2] = {{.fd = fd1, .events = POLLIN}, {.fd = fd2, .events = POLLIN}};
    int n;
    do {
        n = poll(fds, fd2 >= 0 ? 2 : 1, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    int mask = 0;
    if (fds[0].revents & POLLIN) mask |= 1;
    if (fds[0].revents & (POLLHUP | POLLERR)) mask |= 4;
    if (fd2 >= 0 && (fds[1].revents & POLLIN)) mask |= 2;
    return mask;
}

int vd_poll3(int fd1, int fd2, int fd3, int timeout_ms) {
    struct pollfd fds[3] = {{.fd = fd1, .events = POLLIN}, {.fd = fd2, .events = POLLIN}, {.fd = fd3, .events = POLLIN}};
    int n;
    do {
        n = poll(fds, 3, timeout_ms);
    } while (n < 0 && errno == EINTR);
    if (n <= 0) return n;
    int mask = 0;
    if (fds[0].revents & POLLIN) mask |= 1;
    if (fds[0].revents & (POLLHUP | POLLERR)) mask |= 4;
    if (fds[1].revents & POLLIN) mask |= 2;
    if (fds[2].revents & POLLIN) mask |= 8;
    return mask;
}

long vd_raise_nofile(void) {
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
    return (long)limit.rlim_cur;
}

int vd_release_free_memory(void) { return malloc_trim(0); }

int vd_limit_malloc_arenas(int n) { return mallopt(M_ARENA_MAX, n); }

int vd_pidfd_open(pid_t pid) {
    return (int)syscall(SYS_pidfd_open, pid, 0);
}
