import CSandbox
import Foundation
import ViewerLog
import Locking
import SystemCalls

/// Runs the desktop's thumbnailers for `ThumbnailWriter`: as many at once as there are cores
/// (Tumbler's pool; more would only make each slower and time out), each limited and
/// sandboxed (`vd_spawn_helper`: no new privileges, no descriptor of ours, 1 GiB of address
/// space, its CPU time and files bounded; no network, its own user namespace, a read-only view
/// of the file system but for its own directory, a private TMPDIR there, no signal or ptrace
/// out of its sandbox, no connect), in a process group of its own killed past `timeout`, when
/// its request is cancelled, or when the service stops. Their files go in one scratch
/// directory of the process, removed by `stop()`; each run's (its output, its log, its
/// TMPDIR) is removed by `finished(_:)`.
///
/// `state` (a `Locked`) holds the process groups running, whether the runner stopped, and
/// which missing protections were said; `slots` counts the free places. Runs block a thread of
/// their own, never the task pool.
public final class HelperRunner: Sendable {
    public let helpers: DesktopThumbnailers
    /// The desktop's guess of a file's type, for a file the daemon does not read and the
    /// caller gave no type of: the front's (GIO, in the bus module, so that this one links none).
    public let guessMimeType: MimeTypeGuess
    public let timeout: Duration
    private let slots: DispatchSemaphore
    /// Where a protection the kernel does not give is said, once (the service's stderr).
    private let warn: @Sendable (String) -> Void
    /// The process groups running, whether the runner stopped, its scratch directory (made at
    /// the first run: a service that never runs a helper leaves nothing in /tmp), and the
    /// missing protections already said.
    private let state = Locked((running: Set<pid_t>(), stopped: false, scratch: String?.none, warned: Int32(0)))

    /// Why a helper gave no thumbnail.
    public enum Problem: Error, Equatable {
        /// It exited with an error, was killed by a signal, or wrote nothing: the file's fault.
        case failed(String)
        /// It ran past the timeout, or could not be started: maybe the machine's, tried again next time.
        case timedOut(String)
        /// The file is not a regular file now (a FIFO swapped in, say): no helper was started,
        /// and nothing is recorded against the file.
        case unreadable(String)
        case cancelled
    }

    /// A file's MIME type by its name and first bytes; `UnreadableFile` when it is not a
    /// regular file now.
    public typealias MimeTypeGuess = @Sendable (String) throws(DesktopThumbnailers.UnreadableFile) -> String

    public init(helpers: DesktopThumbnailers, guessMimeType: @escaping MimeTypeGuess, timeout: Duration = .seconds(30),
                concurrency: Int = ProcessInfo.processInfo.activeProcessorCount,
                warn: @escaping @Sendable (String) -> Void = { Log.warning("event=helper-sandbox-weakened detail=\(Log.quote($0))") }) {
        self.helpers = helpers
        self.guessMimeType = guessMimeType
        self.timeout = timeout
        self.warn = warn
        slots = DispatchSemaphore(value: max(1, concurrency))
    }

    /// Kills every helper still running (with its process group) and removes the scratch
    /// directory; later runs fail at once.
    public func stop() {
        let scratch = state.withLock { state -> String? in
            state.stopped = true
            // Under the lock: a pid is removed from `running` only after it was reaped, so no
            // number reused meanwhile is signalled.
            for pid in state.running { kill(-pid, SIGKILL) }
            return state.scratch
        }
        if let scratch { try? FileManager.default.removeItem(atPath: scratch) }
    }

    /// Runs `helper` on the file; returns the PNG it wrote, which the caller removes with
    /// `finished(_:)` once read. Cancelling the task kills the helper.
    func run(_ helper: DesktopThumbnailers.Helper, path: String, uri: String, size: Int) async -> Result<String, Problem> {
        let cancelled = Locked(false)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (done: CheckedContinuation<Result<String, Problem>, Never>) in
                Thread { [self] in done.resume(returning: runBlocking(helper, path: path, uri: uri, size: size, cancelled: cancelled)) }.start()
            }
        } onCancel: {
            cancelled.withLock { $0 = true }
        }
    }

    /// Removes what a run left (its output, log and TMPDIR).
    func finished(_ output: String) {
        try? FileManager.default.removeItem(atPath: (output as NSString).deletingLastPathComponent)
    }

    /// `run` on the calling thread (tests call it from a thread of their own, so that no
    /// turn on the concurrency pool is needed to see its answer).
    func runBlocking(_ helper: DesktopThumbnailers.Helper, path: String, uri: String, size: Int,
                     cancelled: Locked<Bool> = Locked(false)) -> Result<String, Problem> {
        let name = URL(fileURLWithPath: helper.program).lastPathComponent
        // Checked as the front opens any file a caller names, so that a FIFO under the name
        // is refused at once rather than hold a helper (and a slot) until the timeout.
        do {
            _ = try DesktopThumbnailers.head(ofRegularFile: path, count: 1)
        } catch {
            return .failure(.unreadable(error.description))
        }
        slots.wait()
        defer { slots.signal() }
        guard !cancelled.withLock({ $0 }) else { return .failure(.cancelled) }
        let scratch = state.withLock { state -> String? in
            guard !state.stopped else { return nil }
            if state.scratch == nil {
                var template = Array((NSTemporaryDirectory() as NSString).appendingPathComponent("viewerd-thumbnailer-XXXXXX").utf8CString)
                state.scratch = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }.map { String(cString: $0) }
            }
            return state.scratch
        }
        guard let scratch else { return .failure(state.withLock { $0.stopped } ? .cancelled : .timedOut("no scratch directory for \(name)")) }
        var template = Array((scratch + "/run-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            return .failure(.timedOut("no scratch directory for \(name): \(String(cString: strerror(errno)))"))
        }
        let directory = String(cString: made), output = directory + "/thumbnail.png", log = directory + "/stderr"
        // Its own temporary directory, beside its output: the only place it may write.
        let temporary = directory + "/tmp"
        guard mkdir(temporary, 0o700) == 0 else {
            let reason = String(cString: strerror(errno))
            finished(output)
            return .failure(.timedOut("no temporary directory for \(name): \(reason)"))
        }
        // Read back through this descriptor, never by the name, which the helper may replace.
        let logFD = open(log, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        defer { if logFD >= 0 { close(logFD) } }
        let argv = helper.command(path: path, uri: uri, output: output, size: size)
        var environment = ProcessInfo.processInfo.environment
        environment["TMPDIR"] = temporary
        let cpuSeconds = UInt64(max(1, timeout.components.seconds)) + 1
        var report = vd_helper_report()
        // Registered under the lock that `stop()` takes, so that no helper starts unseen by it.
        let pid = state.withLock { state -> pid_t in
            guard !state.stopped else { return 0 }
            let pid = directory.withCString { writable in
                var limits = vd_helper_limits(max_memory: 1 << 30, max_cpu_seconds: cpuSeconds, max_file_bytes: 256 << 20, writable: writable)
                return Posix.withCStrings(argv) { cArgv in
                    Posix.withCStrings(environment.map { "\($0.key)=\($0.value)" }) {
                        vd_spawn_helper(helper.program, cArgv, $0, logFD, &limits, &report)
                    }
                }
            }
            if pid > 0 { state.running.insert(pid) }
            return pid
        }
        guard pid > 0 else {
            let reason = String(cString: strerror(errno))
            finished(output)
            return .failure(pid == 0 ? .cancelled : .timedOut("\(name) could not be started: \(reason)"))
        }
        warnOnce(about: report)
        // The group made here too (the child makes it as well): a kill of the group right
        // after the fork must not miss a child that has not run yet.
        setpgid(pid, pid)
        // Waits in slices, to see a cancel; the pidfd is readable once the helper has exited.
        // Without one (a kernel before 5.3) it is killed and said to have timed out.
        let pidfd = try? Posix.pidfdOpen(pid)
        let deadline = ContinuousClock.now + timeout
        var exited = false, wasCancelled = false
        while let pidfd, !exited && ContinuousClock.now < deadline {
            wasCancelled = cancelled.withLock { $0 } || state.withLock { $0.stopped }
            if wasCancelled { break }
            exited = Posix.wait(pidfd, for: Int16(POLLIN), timeout: min(.milliseconds(100), deadline - .now)) != 0
        }
        if let pidfd { Posix.close(pidfd) }
        kill(-pid, SIGKILL)  // past the timeout or cancelled; else what it left running in its group
        if !exited { kill(pid, SIGKILL) }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        state.withLock { _ = $0.running.remove(pid) }
        let said = Self.lastLine(of: logFD)
        func failing(_ problem: Problem) -> Result<String, Problem> {
            finished(output)
            return .failure(problem)
        }
        if wasCancelled { return failing(.cancelled) }
        if report.exec_errno != 0 { return failing(.timedOut("\(name) could not be started: \(String(cString: strerror(report.exec_errno)))")) }
        if !exited { return failing(.timedOut("\(name) took more than \(timeout) and was killed")) }
        if status & 0x7f != 0 { return failing(.failed("\(name) was killed by signal \(status & 0x7f)" + (said.map { ": \($0)" } ?? ""))) }
        if (status >> 8) & 0xff != 0 {
            return failing(.failed("\(name) exited with \((status >> 8) & 0xff)" + (said.map { ": \($0)" } ?? "")))
        }
        guard access(output, R_OK) == 0 else { return failing(.failed("\(name) wrote no thumbnail" + (said.map { ": \($0)" } ?? ""))) }
        return .success(output)
    }

    /// The last line the helper wrote to its standard error (from the log's last 4 KiB).
    private static func lastLine(of fd: Int32) -> String? {
        guard fd >= 0, let size = try? Posix.status(fd).st_size, size > 0 else { return nil }
        var tail = [UInt8](repeating: 0, count: Int(min(size, 4096)))
        let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, off_t(size) - off_t($0.count)) }
        guard n > 0 else { return nil }
        return String(decoding: tail.prefix(n), as: UTF8.self).split(whereSeparator: \.isNewline).last.map(String.init)
    }

    /// Says, once for each, the protections the kernel did not give a helper (it runs without
    /// them: a helper is the desktop's own program, as it would run under Tumbler).
    private func warnOnce(about report: vd_helper_report) {
        let wanted = Int32(VD_HELPER_NAMESPACES | VD_HELPER_FILES | VD_HELPER_NO_CONNECT)
        let missing = wanted & ~report.protections
        let new = state.withLock { state -> Int32 in
            defer { state.warned |= missing }
            return missing & ~state.warned
        }
        if new & Int32(VD_HELPER_NAMESPACES) != 0 {
            warn("desktop thumbnailers run with the session's network: no user namespace for them "
                 + "(\(String(cString: strerror(report.namespace_errno))); see user.max_user_namespaces, or AppArmor's "
                 + "kernel.apparmor_restrict_unprivileged_userns)")
        }
        if new & Int32(VD_HELPER_FILES) != 0 {
            warn("desktop thumbnailers may write wherever the user may: no Landlock on this kernel "
                 + "(\(String(cString: strerror(report.files_errno))))")
        }
        if new & Int32(VD_HELPER_NO_CONNECT) != 0 {
            warn("desktop thumbnailers may connect to the session's Unix sockets: their seccomp filter could not be loaded")
        }
    }
}
