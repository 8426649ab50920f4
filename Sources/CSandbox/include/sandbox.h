// The worker's sandbox in C: libseccomp's rule calls are variadic (Swift cannot call `...`),
// so they are wrapped here with fixed arguments; the policy itself (which call, why) is
// Swift's (ViewerDaemon: Workers/SandboxPolicy.swift). Also the process-wide protections
// that are a few system calls each (prctl, setrlimit, unshare, Landlock).
#ifndef VIEWERD_SANDBOX_H
#define VIEWERD_SANDBOX_H
#include <stdint.h>

/// Constants the policy compares arguments with (from headers Swift's Glibc does not export).
enum {
    /// Flags every thread's clone has and no process's clone has together.
    VD_CLONE_THREAD_FLAGS = 0x00000100 | 0x00000800 | 0x00010000,  // CLONE_VM | CLONE_SIGHAND | CLONE_THREAD
    /// Flags of open that write, create, truncate or append.
    VD_OPEN_WRITE_INTENT = 01 | 02 | 0100 | 01000 | 02000,  // O_WRONLY | O_RDWR | O_CREAT | O_TRUNC | O_APPEND
    VD_AT_EMPTY_PATH = 0x1000,
    /// fcntl's commands a worker's libraries use, and F_SETFL's flag that arms signals (SIGIO).
    VD_F_DUPFD = 0,
    VD_F_GETFD = 1,
    VD_F_SETFD = 2,
    VD_F_GETFL = 3,
    VD_F_SETFL = 4,
    VD_F_DUPFD_CLOEXEC = 1030,
    VD_O_ASYNC = 020000,
    VD_PR_SET_NAME = 15,
    VD_PR_GET_NAME = 16,
};

/// A filter being built (a libseccomp context). Default action: kill the process (SIGSYS).
typedef struct vd_filter vd_filter;

/// A new filter whose default action kills the whole process; NULL if libseccomp cannot
/// make one.
vd_filter *vd_filter_new(void);
void vd_filter_free(vd_filter *filter);

/// Comparisons an argument condition can make: equal, (arg & mask) == value, or arg >= value.
enum { VD_ARG_EQ = 1, VD_ARG_MASKED_EQ = 2, VD_ARG_GE = 3 };

/// One condition on one argument of a call.
typedef struct {
    int op;
    unsigned arg;
    uint64_t mask;
    uint64_t value;
} vd_condition;

/// Adds a rule for the system call `name`: `errno_value` 0 allows it, a positive value makes
/// it fail with that errno instead of running, a negative value hands it to the supervisor
/// (SCMP_ACT_NOTIFY: the calling thread waits until the listener's holder answers). The rule
/// applies only when all `count` conditions hold (each on a different argument; none: always);
/// a call no rule matches gets the default action, kill. libseccomp tests a call's conditions
/// on one argument in the order equal, then >= (its db_chain_lt), so a >= rule catches what the
/// equal rules beside it leave.
/// Returns 0; 1 when this architecture has no such call (nothing to allow); a negative errno.
int vd_filter_add(vd_filter *filter, const char *name, int errno_value, const vd_condition *conditions, int count);

/// Loads the filter into the kernel for every thread of the process (TSYNC). Needs
/// no_new_privs (set first). Returns 0 or a negative errno.
int vd_filter_load(vd_filter *filter);

/// The listener of a loaded filter with notify rules (seccomp_notify_fd), or a negative errno.
int vd_filter_notify_fd(vd_filter *filter);

/// prctl(PR_SET_DUMPABLE, dumpable). 0 or -1.
int vd_set_dumpable(int dumpable);

/// A read-only open a worker's thread is waiting in, as the daemon reads it.
typedef struct {
    uint64_t id;
    /// The calling thread, in the daemon's pid namespace.
    int pid;
    /// openat's descriptor (-100, AT_FDCWD, for open).
    int dirfd;
    /// 0, or why the path could not be read from the worker's memory (EPERM: not dumpable
    /// or Yama; EFAULT; ENAMETOOLONG).
    int read_errno;
} vd_open_request;

/// The size of each of vd_notify_receive's buffers: PATH_MAX and its NUL.
enum { VD_PATH_BUFFER = 4097 };

/// Waits for the next notification on `notify_fd` and reads its path from the caller's
/// memory (process_vm_readv) into `path` (VD_PATH_BUFFER bytes, NUL-terminated; empty when
/// it could not be read); for a relative path, `base` (as large) gets the directory it is
/// relative to (the target of /proc/PID/cwd or /proc/PID/fd/DIRFD), else is empty. Returns 0 when the request is still pending (answer it with
/// vd_notify_answer), or a negative errno (-ENOENT: the thread is gone, nothing to answer).
int vd_notify_receive(int notify_fd, vd_open_request *request, char *path, char *base);

/// Answers request `id`: `allow` lets the call run as if unfiltered (SECCOMP_USER_NOTIF_FLAG_
/// CONTINUE: Landlock still decides where it may open), else it fails with EACCES. Returns 0
/// or a negative errno (-ENOENT: the thread is gone).
int vd_notify_answer(int notify_fd, uint64_t id, int allow);

/// prctl(PR_SET_NO_NEW_PRIVS): no execve can gain privileges any more. 0 or -1.
int vd_no_new_privs(void);
/// prctl(PR_SET_DUMPABLE, 0): no core dump, no ptrace attach by same-uid processes. 0 or -1.
int vd_not_dumpable(void);
/// setrlimit(resource, {soft, hard}). 0 or -1.
int vd_set_limit(int resource, unsigned long long soft, unsigned long long hard);
/// The resources the worker limits (sys/resource.h's values, which Swift sees as enum cases).
enum { VD_RLIMIT_CPU = 0, VD_RLIMIT_CORE = 4 };
/// unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC): no network (not even abstract Unix
/// sockets of the host's namespace), no System V IPC. Only while single-threaded. 0 or -1.
int vd_unshare_network(void);

/// Landlock: from now on this thread and the threads it starts may open files only under
/// `read_paths` (read, and for `exec_paths` map as code too), and write, create or delete
/// nothing anywhere. Paths that do not exist are skipped. Call while single-threaded (the
/// restriction binds the calling thread and its future children only). Returns the Landlock
/// ABI version in force (>= 1), or -1 with errno (ENOSYS, EOPNOTSUPP: no Landlock).
int vd_landlock(const char *const *read_paths, int read_count, const char *const *exec_paths, int exec_count);

#endif
