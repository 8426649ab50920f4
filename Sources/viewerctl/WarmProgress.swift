import Foundation
import Locking
import ViewerClient
import ViewerProtocol

/// How one file of a warm ended.
enum WarmOutcome: Sendable {
    /// Its rendition is in the store now: rendered by this warm, or there already (`fromCache`).
    case warmed(fromCache: Bool)
    /// Withdrawn by Ctrl-C before it was answered: not warmed (a render nearly done may still
    /// have been stored; see PROTOCOL.md, "Cancelling and changing priority").
    case cancelled
    /// The daemon's error for this file (or the connection's).
    case failed(any Error)

    /// Whether `error` says the daemon is stopping or gone (`shutting-down`, the connection
    /// closed, no daemon to reconnect to): the end of the warm, not a fault of the file.
    static func meansDaemonStopped(_ error: any Error) -> Bool {
        switch error as? ViewerClientError {
        case .server(let reply)?: reply.code == .shuttingDown
        case .connectionClosed?, .unavailable?: true
        default: false
        }
    }
}

/// Why a warm ended before its last file.
enum WarmStop: Sendable {
    /// Ctrl-C (SIGINT).
    case interrupted
    /// The daemon stopped or went away mid-warm; the first error that said so.
    case daemonStopped(any Error)
}

/// The renders a warm has asked for and not yet heard the end of, and whether the warm is
/// stopping: once it is, nothing more is sent and each pending one is withdrawn (CANCEL)
/// while its answer is still awaited. State behind one lock.
final class PendingRenders: Sendable {
    private let state = Locked<(handles: [ObjectIdentifier: RenderRequestHandle], stopped: WarmStop?)>(([:], nil))

    var stopped: WarmStop? { state.withLock { $0.stopped } }

    func add(_ handle: RenderRequestHandle) {
        let stopping = state.withLock { state -> Bool in
            state.handles[ObjectIdentifier(handle)] = handle
            return state.stopped != nil
        }
        if stopping { handle.withdraw() }  // the stop came between the window's check and the send
    }

    func remove(_ handle: RenderRequestHandle) {
        _ = state.withLock { $0.handles.removeValue(forKey: ObjectIdentifier(handle)) }
    }

    /// Stops the warm for `reason` (the first reason given stays). Ctrl-C also withdraws what
    /// is pending; a daemon that stops finishes the renders it is running (for up to 10 s) and
    /// answers them, so those are awaited, not withdrawn.
    func stop(_ reason: WarmStop) {
        let handles = state.withLock { state -> [RenderRequestHandle] in
            if state.stopped == nil { state.stopped = reason }
            return reason.isInterrupt ? Array(state.handles.values) : []
        }
        for handle in handles { handle.withdraw() }
    }
}

/// Counts, rate, ETA and failures of a warm; a live line on a terminal, a summary otherwise.
/// All state behind `lock`.
final class Progress: @unchecked Sendable {
    private let lock = NSLock()
    private let total: Int
    private let skipped: Int
    private let live: Bool
    private let started = Date()
    private var completed = 0
    private var rendered = 0
    private var alreadyStored = 0
    private(set) var failed = 0
    private var failedByKind: [String: Int] = [:]
    private var lastDraw = Date.distantPast

    init(total: Int, skipped: Int, live: Bool) {
        self.total = total
        self.skipped = skipped
        self.live = live
    }

    func done(path: String, _ outcome: WarmOutcome) {
        lock.lock()
        defer { lock.unlock() }
        switch outcome {
        case .warmed(fromCache: true): alreadyStored += 1
        case .warmed(fromCache: false): rendered += 1
        case .cancelled: return  // not warmed, not failed: the summary counts it as not warmed
        case .failed(let error):
            failed += 1
            let kind: String
            if case ViewerClientError.server(let reply) = error { kind = reply.code?.name ?? "error" } else { kind = "error" }
            failedByKind[kind, default: 0] += 1
            clearLine()
            printError("\(path): \(error)")
        }
        completed += 1
        if live && (Date().timeIntervalSince(lastDraw) > 0.1 || completed == total) {
            lastDraw = Date()
            draw()
        }
    }

    private func draw() {
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let rate = Double(completed) / elapsed
        let eta = rate > 0 ? Double(total - completed) / rate : 0
        let width = 24
        let filled = total > 0 ? completed * width / total : width
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = "\r[\(bar)] \(completed)/\(total)  \(String(format: "%.1f", rate))/s  ETA \(Self.duration(eta))  failed \(failed)"
        FileHandle.standardError.write(Data(line.utf8))
    }

    private func clearLine() {
        if live { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    /// The summary line. A whole warm: `41 files: 30 rendered, 7 already stored, 4 failed (…)`;
    /// one cut short: `interrupted: 4 of 41 warmed (4 rendered, 0 already stored), 0 failed, 37 not warmed`.
    func finish(_ stop: WarmStop?) {
        lock.lock()
        defer { lock.unlock() }
        if live { FileHandle.standardError.write(Data("\n".utf8)) }
        let elapsed = Date().timeIntervalSince(started)
        let kinds = failedByKind.sorted { $0.key < $1.key }.map { "\($1) \($0)" }.joined(separator: ", ")
        let failures = "\(failed) failed" + (kinds.isEmpty ? "" : " (\(kinds))")
        let counts: String
        switch stop {
        case nil:
            counts = "\(total == 1 ? "1 file" : "\(total) files"): \(rendered) rendered, \(alreadyStored) already stored, \(failures)"
        case let stop?:
            let warmed = rendered + alreadyStored
            counts = "\(stop.isInterrupt ? "interrupted" : "viewerd stopped"): \(warmed) of \(total) warmed "
                + "(\(rendered) rendered, \(alreadyStored) already stored), \(failures), \(total - warmed - failed) not warmed"
        }
        let rate = elapsed > 0 ? Double(completed) / elapsed : 0
        print(counts + (skipped > 0 ? ", skipped \(skipped) (hidden or not images)" : "") +
              String(format: ", %.1f s, %.1f files/s", elapsed, rate))
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }
}

extension WarmStop {
    var isInterrupt: Bool { if case .interrupted = self { true } else { false } }
}
