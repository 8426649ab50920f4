import Foundation
import Locking
import ViewerClient
import ViewerProtocol

/// How one file of a warm ended.
enum WarmOutcome: Sendable {
    /// Its rendition is in the store now: rendered by this warm, or there already (`fromCache`).
    case warmed(fromCache: Bool)
    /// Rendered from a source whose data ends early (a file still being copied): answered,
    /// not stored, so not warmed (`RenderResult.sourcePartial`).
    case truncated
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
/// The counts are behind one lock (`Locked`), held while a line is written so lines never mix.
final class Progress: Sendable {
    private struct Counts {
        var completed = 0
        var rendered = 0
        var alreadyStored = 0
        var truncated = 0
        var failed = 0
        var failedByKind: [String: Int] = [:]
        var lastDraw = Date.distantPast
    }

    private let total: Int
    private let skipped: Int
    private let live: Bool
    private let started = Date()
    private let counts = Locked(Counts())

    init(total: Int, skipped: Int, live: Bool) {
        self.total = total
        self.skipped = skipped
        self.live = live
    }

    var failed: Int { counts.withLock { $0.failed } }

    func done(path: String, _ outcome: WarmOutcome) {
        counts.withLock { counts in
            switch outcome {
            case .warmed(fromCache: true): counts.alreadyStored += 1
            case .warmed(fromCache: false): counts.rendered += 1
            case .truncated:
                counts.truncated += 1
                clearLine()
                printError("\(path): source truncated (still being copied?): rendered, not stored")
            case .cancelled: return  // neither warmed nor failed: the summary counts it as not warmed
            case .failed(let error):
                counts.failed += 1
                let kind: String
                if case ViewerClientError.server(let reply) = error { kind = reply.code?.name ?? "error" } else { kind = "error" }
                counts.failedByKind[kind, default: 0] += 1
                clearLine()
                printError("\(path): \(error)")
            }
            counts.completed += 1
            if live && (Date().timeIntervalSince(counts.lastDraw) > 0.1 || counts.completed == total) {
                counts.lastDraw = Date()
                draw(counts)
            }
        }
    }

    private func draw(_ counts: Counts) {
        let elapsed = max(Date().timeIntervalSince(started), 0.001)
        let rate = Double(counts.completed) / elapsed
        let eta = rate > 0 ? Double(total - counts.completed) / rate : 0
        let width = 24
        let filled = total > 0 ? counts.completed * width / total : width
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        let line = "\r[\(bar)] \(counts.completed)/\(total)  \(String(format: "%.1f", rate))/s  ETA \(Self.duration(eta))  failed \(counts.failed)"
        FileHandle.standardError.write(Data(line.utf8))
    }

    private func clearLine() {
        if live { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
    }

    /// The summary line. A whole warm: `41 files: 30 rendered, 7 already stored, 4 failed (…)`
    /// (with `1 source truncated (not stored), ` before the failures when a file was);
    /// one cut short: `interrupted: 4 of 41 warmed (4 rendered, 0 already stored), 0 failed, 37 not warmed`.
    func finish(_ stop: WarmStop?) {
        counts.withLock { c in
            if live { FileHandle.standardError.write(Data("\n".utf8)) }
            let elapsed = Date().timeIntervalSince(started)
            let kinds = c.failedByKind.sorted { $0.key < $1.key }.map { "\($1) \($0)" }.joined(separator: ", ")
            let failures = (c.truncated > 0 ? "\(c.truncated) source truncated (not stored), " : "")
                + "\(c.failed) failed" + (kinds.isEmpty ? "" : " (\(kinds))")
            let line: String
            switch stop {
            case nil:
                line = "\(total == 1 ? "1 file" : "\(total) files"): \(c.rendered) rendered, \(c.alreadyStored) already stored, \(failures)"
            case let stop?:
                let warmed = c.rendered + c.alreadyStored
                line = "\(stop.isInterrupt ? "interrupted" : "viewerd stopped"): \(warmed) of \(total) warmed "
                    + "(\(c.rendered) rendered, \(c.alreadyStored) already stored), \(failures), "
                    + "\(total - warmed - c.truncated - c.failed) not warmed"
            }
            let rate = elapsed > 0 ? Double(c.completed) / elapsed : 0
            print(line + (skipped > 0 ? ", skipped \(skipped) (hidden or not images)" : "") +
                  String(format: ", %.1f s, %.1f files/s", elapsed, rate))
        }
    }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds.rounded())
        return s >= 60 ? "\(s / 60)m\(s % 60)s" : "\(s)s"
    }
}

extension WarmStop {
    var isInterrupt: Bool { if case .interrupted = self { true } else { false } }
}
