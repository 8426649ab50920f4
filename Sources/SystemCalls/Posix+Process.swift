import CPosix
#if canImport(Glibc)
import Glibc
#endif

/// Processes: starting a worker, waiting for it, its CPU time, and what a process sets on
/// itself before it starts threads (death with its parent, malloc's arenas, its limits).
extension Posix {
    /// Starts `executable --worker ARGUMENTS...` with `socket` as its descriptor 3,
    /// /dev/null as 0 and 1, our standard error as 2, no other descriptor, no blocked
    /// signal, and exactly `environment` (NULL-terminated `NAME=value` strings).
    ///
    /// ```swift
    /// let pid = try Posix.spawnWorker(executable, socket: pair[1], arguments: ["--nice", "5"], environment: env.pointers)
    /// ```
    public static func spawnWorker(_ executable: String, socket: Int32, arguments: [String],
                                   environment: UnsafePointer<UnsafeMutablePointer<CChar>?>) throws(SystemError) -> pid_t {
        let pid = withCStrings(arguments) { vd_spawn_worker(executable, socket, $0, environment) }
        guard pid > 0 else { throw SystemError("posix_spawn \(executable)") }
        return pid
    }

    /// Waits for the child `pid` (without blocking unless `blocking`). Returns its wait
    /// status once it has ended, nil while it runs.
    public static func wait(_ pid: pid_t, blocking: Bool) throws(SystemError) -> Int32? {
        var status: Int32 = 0
        let rc = vd_wait(pid, &status, blocking ? 1 : 0)
        guard rc >= 0 else { throw SystemError("waitpid \(pid)") }
        return rc == 0 ? nil : status
    }

    /// Sends `signal` to `pid`. A process that has already gone (ESRCH) is not an error:
    /// the caller reaps it next.
    public static func kill(_ pid: pid_t, _ signal: Int32) {
        _ = Glibc.kill(pid, signal)
    }

    /// The CPU time (user and system) the process `pid` has used, nil when it is unknown.
    public static func cpuTime(of pid: pid_t) -> Duration? {
        let seconds = vd_process_cpu_seconds(pid)
        return seconds < 0 ? nil : .nanoseconds(Int64(seconds * 1e9))
    }

    /// Asks for SIGKILL when the parent thread ends (PR_SET_PDEATHSIG), then checks that the
    /// parent is still `parent`. Returns false when the request failed or the parent is gone.
    public static func dieWithParent(_ parent: pid_t) -> Bool {
        vd_die_with_parent(parent) == 0
    }

    /// Limits malloc to `count` heaps (M_ARENA_MAX): each keeps its freed memory. Call it
    /// before the process starts threads.
    public static func limitMallocArenas(_ count: Int32) {
        _ = vd_limit_malloc_arenas(count)
    }

    /// Hands free heap pages back to the system (malloc_trim). Returns whether any were.
    @discardableResult
    public static func releaseFreeMemory() -> Bool {
        vd_release_free_memory() == 1
    }

    /// Sets the address-space limit (RLIMIT_AS, soft and hard) to `bytes`.
    public static func limitAddressSpace(_ bytes: UInt64) throws(SystemError) {
        try check("setrlimit RLIMIT_AS") { vd_limit_address_space(bytes) }
    }

    /// Raises the soft limit of open descriptors to the hard one. Returns the new soft limit.
    @discardableResult
    public static func raiseDescriptorLimit() -> Int {
        vd_raise_nofile()
    }

    /// Sets this process's nice value (every thread started afterwards inherits it).
    public static func setNice(_ value: Int32) throws(SystemError) {
        try check("setpriority") { setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, value) }
    }
}
