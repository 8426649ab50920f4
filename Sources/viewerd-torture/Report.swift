import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport

/// Everything the run counts, from any thread.
final class Report: @unchecked Sendable {
    private let lock = NSLock()
    private(set) var phases: [(name: String, cases: Int, violations: Int, seconds: Double)] = []
    private var currentPhase = ""
    private var phaseCases = 0
    private var phaseViolations = 0
    private var phaseStart = ContinuousClock.now
    private(set) var answers: [String: Int] = [:]
    private(set) var violations: [String] = []
    private(set) var notes: [String] = []
    var lost = 0
    var duplicated = 0
    var spurious = 0
    var daemonCrashes = 0
    var decoderCrashAnswers = 0
    var timeoutAnswers = 0
    var workersKilledByTorture = 0
    var peakDaemonKiB = 0
    var peakWorkerKiB = 0
    var maxBystanderLatency: Duration = .zero
    let verbose: Bool

    init(verbose: Bool) { self.verbose = verbose }

    func begin(_ phase: String) {
        lock.withLock {
            currentPhase = phase
            phaseCases = 0
            phaseViolations = 0
            phaseStart = .now
        }
        emit("== \(phase)")
    }

    func end() {
        lock.withLock {
            phases.append((currentPhase, phaseCases, phaseViolations, (ContinuousClock.now - phaseStart).seconds))
        }
    }

    func cases(_ n: Int = 1) { lock.withLock { phaseCases += n } }

    /// Counts one answer by outcome ("result", an error code name, "cancelled", ...).
    func answer(_ outcome: String) {
        lock.withLock {
            answers[outcome, default: 0] += 1
            if outcome == "decoder-crashed" { decoderCrashAnswers += 1 }
            if outcome == "timeout" { timeoutAnswers += 1 }
        }
    }

    func violation(_ text: String) {
        lock.withLock {
            violations.append("[\(currentPhase)] \(text)")
            phaseViolations += 1
        }
        emit("  VIOLATION: \(text)")
    }

    func note(_ text: String) {
        lock.withLock { notes.append("[\(currentPhase)] \(text)") }
        emit("  note: \(text)")
    }

    func info(_ text: String) {
        emit("  \(text)")
    }

    func update(_ body: (Report) -> Void) { lock.withLock { body(self) } }

    func bystanderLatency(_ latency: Duration) {
        lock.withLock { maxBystanderLatency = max(maxBystanderLatency, latency) }
    }

    func memory(daemonKiB: Int, workerKiB: Int) {
        lock.withLock {
            peakDaemonKiB = max(peakDaemonKiB, daemonKiB)
            peakWorkerKiB = max(peakWorkerKiB, workerKiB)
        }
    }

    var violationCount: Int { lock.withLock { violations.count } }
}

/// Samples the daemon's and its workers' memory every 100 ms while a phase runs.
final class MemoryWatch: @unchecked Sendable {
    private let daemon: DaemonProcess
    private let report: Report
    private let stopFlag = NSLock()
    private var stopped = false
    private let done = DispatchSemaphore(value: 0)
    private(set) var peakDaemonKiB = 0

    init(_ daemon: DaemonProcess, report: Report) {
        self.daemon = daemon
        self.report = report
        Thread { [self] in
            while !stopFlag.withLock({ stopped }) {
                let (rss, hwm) = daemon.memory()
                let workers = daemon.workerPIDs().map { Int((ProcessTable.memory(of: $0)?.resident ?? 0) >> 10) }.max() ?? 0
                stopFlag.withLock { peakDaemonKiB = max(peakDaemonKiB, rss, hwm) }
                report.memory(daemonKiB: max(rss, hwm), workerKiB: workers)
                usleep(100_000)
            }
            done.signal()
        }.start()
    }

    /// Stops sampling; returns the daemon's peak in KiB.
    func stop() -> Int {
        stopFlag.withLock { stopped = true }
        done.wait()
        return stopFlag.withLock { peakDaemonKiB }
    }
}

/// Checks a RESULT: it must decode, at the size it announces, in the format it claims.
func verifyRendition(_ result: RenderResult) -> String? {
    if result.format == .raw {
        return result.bytes.count == Int(result.width) * Int(result.height) * 4 ? nil
            : "raw rendition of \(result.bytes.count) bytes for \(result.width)x\(result.height)"
    }
    do {
        let decoded = try ImageFixtures.decode(result.bytes)
        guard decoded.width == Int(result.width), decoded.height == Int(result.height) else {
            return "rendition announced \(result.width)x\(result.height), decodes as \(decoded.width)x\(decoded.height)"
        }
        return nil
    } catch {
        return "rendition does not decode: \(error)"
    }
}

/// One line to standard output, unbuffered (the run is followed live, and may be killed).
func emit(_ line: String = "") {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
