// See include/helper.h. Everything the child runs before execve is async-signal-safe (the
// parent has threads): system calls, no malloc, no stdio.
#define _GNU_SOURCE
#include "helper.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/landlock.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

// Landlock's ABI beyond the headers of Debian 12 (Linux 6.1): the kernel's numbers, which do not change.
enum {
    ACCESS_FS_TRUNCATE = 1 << 14,       // ABI 3
    ACCESS_NET_BIND_TCP = 1 << 0,       // ABI 4
    ACCESS_NET_CONNECT_TCP = 1 << 1,    // ABI 4
    SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0, // ABI 6
    SCOPE_SIGNAL = 1 << 1,              // ABI 6
};

/// landlock_ruleset_attr as of ABI 6; an older kernel takes it while the fields it does not
/// know are zero.
struct ruleset_attr {
    uint64_t handled_access_fs;
    uint64_t handled_access_net;
    uint64_t scoped;
};

/// Writes "ID ID 1" to `file` (/proc/self/uid_map, gid_map): the id the same inside the
/// namespace as outside. Returns 0 or -1.
static int map_to_itself(const char *file, unsigned id) {
    char digits[12], line[32];
    int count = 0, n = 0;
    do {
        digits[count++] = (char)('0' + id % 10);
        id /= 10;
    } while (id != 0);
    for (int copy = 0; copy < 2; copy++) {
        for (int i = count - 1; i >= 0; i--) line[n++] = digits[i];
        line[n++] = ' ';
    }
    line[n++] = '1';
    line[n++] = '\n';
    int fd = open(file, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    int rc = write(fd, line, (size_t)n) == n ? 0 : -1;
    close(fd);
    return rc;
}

/// Own user, network and IPC namespaces, the uid and gid mapped to themselves. 0 or an errno.
static int own_namespaces(void) {
    uid_t uid = getuid();
    gid_t gid = getgid();
    if (unshare(CLONE_NEWUSER | CLONE_NEWNET | CLONE_NEWIPC) != 0) return errno;
    // (Unmapped, the helper would see its files as nobody's: some refuse to run so. The
    // network is gone either way.)
    int fd = open("/proc/self/setgroups", O_WRONLY | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, "deny", 4);
        close(fd);
    }
    map_to_itself("/proc/self/uid_map", uid);
    map_to_itself("/proc/self/gid_map", gid);
    return 0;
}

/// Adds a rule granting `access` beneath `path` (on the file itself when it is not a directory).
static int allow(int ruleset, const char *path, uint64_t access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -1;
    struct landlock_path_beneath_attr rule = {.allowed_access = access, .parent_fd = fd};
    int rc = (int)syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &rule, 0);
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

/// Landlock: read and execute everywhere, write only beneath `writable` and to /dev/null; TCP
/// binds and connects refused (ABI 4), signals and abstract sockets kept inside (ABI 6).
/// Returns the VD_HELPER_* flags it set, or -1 with errno.
static int restrict_files(const char *writable) {
    int abi = (int)syscall(SYS_landlock_create_ruleset, NULL, 0, LANDLOCK_CREATE_RULESET_VERSION);
    if (abi < 1) return -1;
    const uint64_t read = LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR | LANDLOCK_ACCESS_FS_EXECUTE;
    uint64_t write = LANDLOCK_ACCESS_FS_WRITE_FILE | LANDLOCK_ACCESS_FS_REMOVE_DIR | LANDLOCK_ACCESS_FS_REMOVE_FILE |
                     LANDLOCK_ACCESS_FS_MAKE_CHAR | LANDLOCK_ACCESS_FS_MAKE_DIR | LANDLOCK_ACCESS_FS_MAKE_REG |
                     LANDLOCK_ACCESS_FS_MAKE_SOCK | LANDLOCK_ACCESS_FS_MAKE_FIFO | LANDLOCK_ACCESS_FS_MAKE_BLOCK |
                     LANDLOCK_ACCESS_FS_MAKE_SYM;
    uint64_t write_file = LANDLOCK_ACCESS_FS_WRITE_FILE;
    if (abi >= 2) write |= LANDLOCK_ACCESS_FS_REFER;
    if (abi >= 3) {
        write |= ACCESS_FS_TRUNCATE;
        write_file |= ACCESS_FS_TRUNCATE;
    }
    struct ruleset_attr attr = {.handled_access_fs = read | write};
    if (abi >= 4) attr.handled_access_net = ACCESS_NET_BIND_TCP | ACCESS_NET_CONNECT_TCP;
    if (abi >= 6) attr.scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL;
    int ruleset = (int)syscall(SYS_landlock_create_ruleset, &attr, sizeof attr, 0);
    if (ruleset < 0) return -1;
    int rc = allow(ruleset, "/", read);
    if (rc == 0) rc = allow(ruleset, writable, read | write);
    if (rc == 0) allow(ruleset, "/dev/null", LANDLOCK_ACCESS_FS_READ_FILE | write_file);  // `2>/dev/null` in its scripts
    if (rc == 0) rc = (int)syscall(SYS_landlock_restrict_self, ruleset, 0);
    int saved = errno;
    close(ruleset);
    errno = saved;
    if (rc != 0) return -1;
    return VD_HELPER_FILES | (abi >= 6 ? VD_HELPER_SCOPED : 0);
}

#if defined(__x86_64__)
#define NATIVE_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NATIVE_ARCH AUDIT_ARCH_AARCH64
#endif

/// seccomp: connect(2) fails with EACCES, io_uring_setup with ENOSYS (its requests would
/// connect unseen), every call of another ABI (a 32-bit program) with ENOSYS; the rest runs.
/// 0 or -1.
static int refuse_connect(void) {
#ifdef NATIVE_ARCH
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NATIVE_ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        // (x32's calls are x86_64's numbers with a bit of their own)
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~0x40000000U),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_connect, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog program = {.len = (unsigned short)(sizeof code / sizeof code[0]), .filter = code};
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program, 0, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

static void write_all(int fd, const void *bytes, size_t length) {
    const char *p = bytes;
    while (length > 0) {
        ssize_t n = write(fd, p, length);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return;
        p += n;
        length -= (size_t)n;
    }
}

/// Reads up to `length` bytes, until end of file. Returns how many.
static size_t read_all(int fd, void *bytes, size_t length) {
    char *p = bytes;
    size_t done = 0;
    while (done < length) {
        ssize_t n = read(fd, p + done, length - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    return done;
}

/// The child: limits, sandbox, then the helper. Never returns.
static void run_helper(const char *path, const char *const *argv, const char *const *envp, int stderr_fd,
                       const vd_helper_limits *limits, int report_fd) {
    setpgid(0, 0);
    pid_t parent = getppid();
    vd_helper_report report = {0};
    report.namespace_errno = own_namespaces();
    if (report.namespace_errno == 0) report.protections |= VD_HELPER_NAMESPACES;
    // After unshare, which makes new credentials: set on the process as it will execute.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the service died before the signal was set
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0) _exit(127);
    // The report's pipe goes to 3, close-on-exec, the rest of ours is closed: 0, 1, 2 and it.
    int report_copy = fcntl(report_fd, F_DUPFD_CLOEXEC, 10);
    // The log's descriptor, too, is moved out of 0-2 first: a service started with standard
    // input or output closed may have been handed 0 or 1 for it.
    int log_copy = stderr_fd >= 0 ? fcntl(stderr_fd, F_DUPFD_CLOEXEC, 10) : -1;
    dup2(null, 0);
    dup2(null, 1);
    dup2(log_copy >= 0 ? log_copy : null, 2);
    report_fd = dup3(report_copy, 3, O_CLOEXEC) == 3 ? 3 : -1;
    syscall(SYS_close_range, 4, ~0U, 0);
    struct rlimit memory = {limits->max_memory, limits->max_memory},
                  cpu = {limits->max_cpu_seconds, limits->max_cpu_seconds},
                  file = {limits->max_file_bytes, limits->max_file_bytes}, core = {0, 0};
    setrlimit(RLIMIT_AS, &memory);
    setrlimit(RLIMIT_CPU, &cpu);
    setrlimit(RLIMIT_FSIZE, &file);
    setrlimit(RLIMIT_CORE, &core);
    int files = restrict_files(limits->writable);
    if (files > 0) {
        report.protections |= files;
    } else {
        report.files_errno = errno;
    }
    // Last: the filter applies to every call after it.
    if (refuse_connect() == 0) report.protections |= VD_HELPER_NO_CONNECT;
    // The caller may ignore or block SIGTERM, SIGINT and SIGPIPE: the helper must not.
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGPIPE, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    write_all(report_fd, &report, sizeof report);
    execve(path, (char *const *)argv, (char *const *)envp);
    int failure = errno;
    write_all(report_fd, &failure, sizeof failure);
    _exit(127);
}

pid_t vd_spawn_helper(const char *path, const char *const *argv, const char *const *envp, int stderr_fd,
                      const vd_helper_limits *limits, vd_helper_report *report) {
    memset(report, 0, sizeof *report);
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(pipe_fds[0]);
        run_helper(path, argv, envp, stderr_fd, limits, pipe_fds[1]);
    }
    int saved = errno;
    close(pipe_fds[1]);
    if (pid > 0) {
        // The report, then execve's errno only if it failed: the pipe closes on exec.
        if (read_all(pipe_fds[0], report, sizeof *report) < sizeof *report) report->exec_errno = ECHILD;
        int failure = 0;
        if (read_all(pipe_fds[0], &failure, sizeof failure) == sizeof failure) report->exec_errno = failure;
    }
    close(pipe_fds[0]);
    errno = saved;
    return pid;
}
