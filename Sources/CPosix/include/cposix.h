// Linux calls that Swift's Glibc module does not export (epoll, eventfd, signalfd) or
// cannot express (CMSG macros, packed structs), wrapped with fixed arguments.
#ifndef VIEWERD_CPOSIX_H
#define VIEWERD_CPOSIX_H
#include <stdint.h>
#include <sys/types.h>

enum {
    VD_EPOLLIN = 0x001,
    VD_EPOLLOUT = 0x004,
    VD_EPOLLERR = 0x008,
    VD_EPOLLHUP = 0x010,
    VD_EPOLLRDHUP = 0x2000,
};

int vd_epoll_create(void);
int vd_epoll_add(int epfd, int fd, uint32_t events);
int vd_epoll_mod(int epfd, int fd, uint32_t events);
int vd_epoll_del(int epfd, int fd);
/// Waits; fills fds[i] and events[i]; returns the count, 0 on timeout, -1 on error.
int vd_epoll_wait(int epfd, int *fds, uint32_t *events, int max, int timeout_ms);

int vd_eventfd(void);

/// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread (threads started later inherit
/// the mask) and returns a signalfd that reads them. SIGPIPE is ignored.
int vd_signalfd_for_termination(void);
/// Reads one signal number from the signalfd; 0 if none is pending.
int vd_signalfd_read(int fd);

/// Peer credentials of a connected Unix socket.
int vd_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

/// accept4 with SOCK_CLOEXEC | SOCK_NONBLOCK, retrying EINTR.
int vd_accept(int fd);

/// flock(LOCK_EX | LOCK_NB). Returns 0, or -1 with errno (EWOULDBLOCK when held).
int vd_try_lock(int fd);

#endif
