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

/// recvmsg into buf, collecting up to max_fds descriptors passed with SCM_RIGHTS
/// (received close-on-exec) into fds, their count into *nfds. Returns the byte count, 0 at
/// end of stream, -1 with errno (EAGAIN when nothing is there). Retries EINTR.
ssize_t vd_recv_with_fds(int fd, void *buf, size_t len, int *fds, int max_fds, int *nfds);

/// sendmsg of buf with one descriptor attached (SCM_RIGHTS); MSG_NOSIGNAL. Returns the
/// byte count sent or -1 with errno. Retries EINTR.
ssize_t vd_send_with_fd(int fd, const void *buf, size_t len, int passed_fd);

/// The most descriptors `vd_send_with_fds` attaches to one message.
enum { VD_MAX_PASSED_FDS = 4 };

/// sendmsg of buf with `count` (1 to VD_MAX_PASSED_FDS) descriptors attached, in order;
/// MSG_NOSIGNAL. Returns the byte count sent or -1 with errno. Retries EINTR.
ssize_t vd_send_with_fds(int fd, const void *buf, size_t len, const int *passed, int count);

/// A memfd (close-on-exec) holding `len` bytes, sealed against writing, growing and
/// shrinking: a read-only buffer to pass to another process. Returns it, or -1 with errno.
int vd_memfd_sealed(const char *name, const void *bytes, size_t len);

/// F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE: what `vd_memfd_sealed` sets.
enum { VD_SEALS_READ_ONLY = 0x1 | 0x2 | 0x4 | 0x8 };

/// The seals of `fd` (F_GET_SEALS), or -1 with errno.
int vd_memfd_seals(int fd);

/// Maps the first `len` bytes of `fd` read-only and shared (MAP_POPULATE: the pages are
/// there before the first touch). Returns the address, or NULL with errno.
void *vd_map_read_only(int fd, size_t len);

/// Unmaps what `vd_map_read_only` mapped.
void vd_unmap(void *address, size_t len);

/// Bytes a socket has sent that its peer has not read yet (SIOCOUTQ; for a Unix socket the
/// kernel's accounting of them, at least their count), or -1 with errno.
long vd_unread_sent(int fd);

/// Bytes waiting to be read on a socket (FIONREAD), or -1 with errno.
long vd_unread_received(int fd);

/// Asks for SIGKILL when the parent thread ends (PR_SET_PDEATHSIG), then checks that the
/// parent is still `parent`. Returns 0, or -1 if the request failed or the parent is gone.
int vd_die_with_parent(pid_t parent);

/// Starts `exe --worker ARG...` (`args` NULL-terminated, any number) with `sock` as its
/// descriptor 3, /dev/null as 0 and 1, our standard error as 2, no other descriptor, and the
/// environment `envp` (NULL-terminated). Returns the pid, or -1 with errno.
pid_t vd_spawn_worker(const char *exe, int sock, const char *const *args, char *const *envp);

/// waitpid(pid, WNOHANG or blocking). Returns pid when it ended (status in *status), 0 if
/// still running, -1 on error.
pid_t vd_wait(pid_t pid, int *status, int block);

/// CPU seconds (user + system) process `pid` has used (its CPU clock); -1 if unknown.
double vd_process_cpu_seconds(pid_t pid);

/// Sets RLIMIT_AS (bytes). Returns 0 or -1.
int vd_limit_address_space(unsigned long long bytes);

/// poll() on two descriptors for reading; returns a bit mask (1: first ready, 2: second
/// ready, 4: first hung up or errored), 0 on timeout, -1 on error. Retries EINTR.
int vd_poll2(int fd1, int fd2, int timeout_ms);

/// As vd_poll2 with a third descriptor (negative: ignored, as poll does): bit 8 when it is
/// readable (a worker's seccomp listener has a notification).
int vd_poll3(int fd1, int fd2, int fd3, int timeout_ms);

/// Raises the soft limit of open descriptors to the hard limit; returns the new soft limit.
long vd_raise_nofile(void);

/// mallopt(M_ARENA_MAX, n): fewer per-thread heaps (each keeps its freed memory). Call it
/// before the process starts threads.
int vd_limit_malloc_arenas(int n);

/// malloc_trim(0): returns free heap pages to the system. Returns 1 if memory was released.
int vd_release_free_memory(void);

/// flock(LOCK_EX | LOCK_NB). Returns 0, or -1 with errno (EWOULDBLOCK when held).
int vd_try_lock(int fd);

/// openat2(root, relative, {flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS}) through
/// syscall(2) (glibc before 2.41 has no wrapper): resolution may not leave the directory
/// `root` by `..`, an absolute path or symlink, a magic link or a mount crossing upwards.
/// Retries EINTR, and EAGAIN (a concurrent rename seen by the kernel). Returns the
/// descriptor, or -1 with errno: EXDEV when resolution would leave `root`, ENOSYS (or E2BIG,
/// EINVAL) when the kernel has no openat2.
int vd_open_beneath(int root, const char *relative, int flags);

/// A pidfd of `pid` (readable once it has exited), close-on-exec; -1 with errno.
int vd_pidfd_open(pid_t pid);

#endif
