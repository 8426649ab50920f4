// The sandbox of a desktop thumbnailer (a `.thumbnailer` file's program, run by
// viewerd-thumbnailer for the types viewerd does not read): not the decoders' (a helper is any
// program a package installed, whose system calls no list can foresee), but what every helper
// can live with. Set up in the child between fork and execve, so in async-signal-safe calls
// only. See docs/DECISIONS.md, "The desktop's thumbnail service".
#ifndef VIEWERD_HELPER_H
#define VIEWERD_HELPER_H
#include <stdint.h>
#include <sys/types.h>

/// What a helper's child put in place before it executed the helper.
enum {
    /// Its own user, network and IPC namespaces: no network but a loopback that is down, no
    /// abstract Unix socket and no System V IPC of the session. (Its uid and gid are mapped to
    /// themselves: it sees and owns files as before.)
    VD_HELPER_NAMESPACES = 1,
    /// Landlock: it reads and executes anywhere, writes, creates and removes only beneath its
    /// directory (and writes /dev/null), and cannot ptrace a process outside its sandbox.
    VD_HELPER_FILES = 2,
    /// Landlock's scopes (Linux 6.12): it cannot signal a process outside its sandbox, nor
    /// connect to an abstract Unix socket (whatever its namespace).
    VD_HELPER_SCOPED = 4,
    /// A seccomp filter that fails connect(2) with EACCES (the session bus, X11 and Wayland are
    /// Unix sockets with names, which neither the namespace nor Landlock closes) and io_uring
    /// with ENOSYS (a way round it).
    VD_HELPER_NO_CONNECT = 8,
};

/// What the child reports to vd_spawn_helper's caller before it executes the helper.
typedef struct {
    /// VD_HELPER_* flags.
    int32_t protections;
    /// Why there are no namespaces (unshare's errno: EPERM, EINVAL, ENOSPC where the kernel or
    /// a container does not allow an unprivileged user namespace), else 0.
    int32_t namespace_errno;
    /// Why there is no Landlock view (ENOSYS, EOPNOTSUPP: a kernel without it), else 0.
    int32_t files_errno;
    /// Why the helper could not be executed (execve's errno), else 0: it runs.
    int32_t exec_errno;
} vd_helper_report;

/// The limits and the one writable place of a helper.
typedef struct {
    /// RLIMIT_AS, RLIMIT_CPU and RLIMIT_FSIZE.
    uint64_t max_memory;
    uint64_t max_cpu_seconds;
    uint64_t max_file_bytes;
    /// The directory it may write in (its output's; its TMPDIR is made beneath it).
    const char *writable;
} vd_helper_limits;

/// Starts `path` (absolute) with `argv` and `envp` (NULL-terminated) as a desktop thumbnailer:
/// in a process group of its own, standard input and output /dev/null, standard error to
/// `stderr_fd` (-1: /dev/null), no other descriptor inherited, no new privileges, default
/// signal dispositions, killed when the calling thread ends, within `limits`, and in the
/// sandbox of the VD_HELPER_* flags as far as the kernel allows (what it could not have is in
/// `report`, with why). Waits until the helper is executed (or failed to be: exec_errno).
/// Returns its pid, or -1 with errno when it could not be forked.
pid_t vd_spawn_helper(const char *path, const char *const *argv, const char *const *envp, int stderr_fd,
                      const vd_helper_limits *limits, vd_helper_report *report);

#endif
