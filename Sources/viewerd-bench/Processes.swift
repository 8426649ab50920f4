import Foundation
import Locking
import SystemCalls
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Resident memory of a process and its children (the decode workers), sampled on a thread of
/// its own from /proc/<pid>/status (VmRSS, RssAnon, VmHWM) and /proc/<pid>/task/*/children.
final class MemorySampler: @unchecked Sendable {
    struct Peak: Sendable {
        /// Largest sum over the daemon and its workers at one sampling instant (VmRSS).
        var totalRSS: UInt64 = 0
        /// The anonymous part of that sum at its own peak (heap, stacks: no mapped files).
        var totalAnon: UInt64 = 0
        /// Largest sum of proportional set sizes (shared library pages split between the
        /// processes that map them, instead of counted once per process as VmRSS does).
        var totalPSS: UInt64 = 0
        var daemonRSS: UInt64 = 0
        /// Largest single worker.
        var workerRSS: UInt64 = 0
        /// Largest high-water mark (VmHWM) of a worker: the kernel's own peak, so a spike
        /// between two samples still counts (unless the worker exits before the next sample).
        var workerHWM: UInt64 = 0
        var workersAtPeak = 0
        var samples = 0
    }

    private let pid: Int32
    private let interval: UInt32
    private let state = Locked((peak: Peak(), running: true))
    private let done = DispatchSemaphore(value: 0)

    init(pid: Int32, intervalMicros: UInt32 = 20_000) {
        self.pid = pid
        self.interval = intervalMicros
        let thread = Thread { [self] in
            while state.withLock({ $0.running }) {
                sample()
                usleep(interval)
            }
            done.signal()
        }
        thread.name = "bench-memory"
        thread.start()
    }

    private func sample() {
        guard let daemon = ProcessTable.memory(of: pid) else { return }
        // The proportional set (smaps_rollup: the kernel walks every mapping) costs far more
        // than the status file: read on one sample in twelve (about 4 a second). At every
        // sample it took a fifth of a core, from the measured side only when that side uses
        // both cores and its baseline one (viewerd against Tumbler: 0.61 of Tumbler's time
        // measured with it, 0.54 without; BENCHMARKS.md, part 11).
        let withPSS = state.withLock { $0.peak.samples } % 12 == 0
        var total = daemon.resident, anon = daemon.anonymous, largestWorker: UInt64 = 0, workerHWM: UInt64 = 0
        var pss = withPSS ? ProcessTable.proportionalSet(of: pid) : 0
        let children = ProcessTable.children(of: pid)
        for child in children {
            guard let s = ProcessTable.memory(of: child) else { continue }
            total += s.resident
            anon += s.anonymous
            if withPSS { pss += ProcessTable.proportionalSet(of: child) }
            largestWorker = max(largestWorker, s.resident)
            workerHWM = max(workerHWM, s.peak)
        }
        state.withLock { state in
            state.peak.samples += 1
            if total > state.peak.totalRSS {
                state.peak.totalRSS = total
                state.peak.workersAtPeak = children.count
            }
            state.peak.totalAnon = max(state.peak.totalAnon, anon)
            state.peak.totalPSS = max(state.peak.totalPSS, pss)
            state.peak.daemonRSS = max(state.peak.daemonRSS, daemon.resident)
            state.peak.workerRSS = max(state.peak.workerRSS, largestWorker)
            state.peak.workerHWM = max(state.peak.workerHWM, workerHWM)
        }
    }

    func stop() -> Peak {
        state.withLock { $0.running = false }
        done.wait()
        return state.withLock { $0.peak }
    }
}

/// CPU seconds (user + system) a process and its live children have used so far, from
/// /proc/<pid>/stat.
func cpuSeconds(ofTree pid: Int32) -> Double {
    ProcessTable.cpuSeconds(of: pid) + ProcessTable.children(of: pid).map(ProcessTable.cpuSeconds(of:)).reduce(0, +)
}

/// Runs a program to completion with its output discarded; its exit status, peak RSS and
/// CPU seconds (user + system).
func spawnAndWait(_ argv: [String]) -> (status: Int32, maxRSS: UInt64, cpu: Double) {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
    defer { for p in cArgs { free(p) } }
    var pid: pid_t = 0
    let rc = posix_spawnp(&pid, argv[0], &actions, nil, &cArgs, environ)
    guard rc == 0 else { return (-1, 0, 0) }
    var status: Int32 = 0
    var usage = rusage()
    _ = try? Posix.check("wait4") { wait4(pid, &status, 0, &usage) }
    let exited = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    let cpu = Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6
        + Double(usage.ru_stime.tv_sec) + Double(usage.ru_stime.tv_usec) / 1e6
    return (exited, UInt64(usage.ru_maxrss) * 1024, cpu)
}

/// Runs every command to completion, `parallel` at a time (a baseline tool, one process per
/// file): the wall time of the whole, how many exited non-zero, the largest process's peak RSS
/// and the CPU seconds of all.
func spawnAll(_ commands: [[String]], parallel: Int, name: String) -> (wall: Double, failures: Int, maxRSS: UInt64, cpu: Double) {
    let next = Locked((index: 0, failures: 0, maxRSS: UInt64(0), cpu: 0.0))
    let started = now()
    runThreads(parallel, name: name) { _ in
        while true {
            let index = next.withLock { n -> Int in defer { n.index += 1 }; return n.index }
            guard index < commands.count else { return }
            let result = spawnAndWait(commands[index])
            next.withLock { n in
                if result.status != 0 { n.failures += 1 }
                n.maxRSS = max(n.maxRSS, result.maxRSS)
                n.cpu += result.cpu
            }
        }
    }
    let wall = seconds(now() - started)
    return next.withLock { (wall, $0.failures, $0.maxRSS, $0.cpu) }
}

/// Runs a program found on PATH and returns its standard output (nil when it fails).
func runCapturing(_ argv: [String]) -> String? {
    guard let result = try? runTool("/usr/bin/env", argv), result.status == 0 else { return nil }
    return result.stdout
}
