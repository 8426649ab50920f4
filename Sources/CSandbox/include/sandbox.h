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
    VD_PR_SET_NAME = 15,
    VD_PR_GET_NAME = 16,
};

/// A filter being built (a libseccomp context). Default action: kill the process (SIGSYS).
typedef struct vd_filter vd_filter;

/// A new filter whose default action kills the whole process; NULL if libseccomp cannot
/// make one.
vd_filter *vd_filter_new(void);
void vd_filter_free(vd_filter *filter);

/// Comparisons an argument rule can make: equal, or (arg & mask) == value.
enum { VD_ARG_ANY = 0, VD_ARG_EQ = 1, VD_ARG_MASKED_EQ = 2 };

/// Adds a rule for the system call `name`: `errno_value` 0 allows it, a positive value makes
/// it fail with that errno instead of running. With `op` VD_ARG_EQ or VD_ARG_MASKED_EQ the
/// rule applies only when argument `arg` compares so (else the default action: kill).
/// Returns 0; 1 when this architecture has no such call (nothing to allow); a negative errno.
int vd_filter_add(vd_filter *filter, const char *name, int errno_value, int op, unsigned arg,
                  uint64_t mask, uint64_t value);

/// Loads the filter into the kernel for every thread of the process (TSYNC). Needs
/// no_new_privs (set first). Returns 0 or a negative errno.
int vd_filter_load(vd_filter *filter);

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
