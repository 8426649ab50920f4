import Foundation
import HTTPServer
import Locking
import SystemCalls
import ViewerLog

/// One logfmt line per request (`event=request method=GET route=iiif target=… status=200
/// bytes=5120 duration_ms=1.42 peer=127.0.0.1`): to standard error through `Log` (so under
/// systemd it is the journal's, at info), or appended to a file with a `time=` field first.
/// Values a client chose (the target, the method) go through `Log.quote`, so none can forge a line.
final class AccessLog: Sendable {
    enum Sink {
        case standardError
        case file(Int32)
    }

    private let sink: Sink
    /// Held while a line is written to the file, so lines from several threads never
    /// interleave; holds whether a failed write was logged already.
    private let writing = Locked<Bool>(false)
    private static let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// `destination`: "-" for standard error, else a path opened for appending (created 0640).
    init(destination: String) throws {
        if destination == "-" {
            sink = .standardError
        } else {
            let fd = open(destination, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o640)
            guard fd >= 0 else { throw SystemError("open \(destination)", Errno.current) }
            sink = .file(fd)
        }
    }

    deinit { if case .file(let fd) = sink { Posix.close(fd) } }

    func record(_ completion: HTTPServer.Completion, route: String) {
        let milliseconds = Double(completion.duration.components.seconds) * 1000
            + Double(completion.duration.components.attoseconds) / 1e15
        var line = "event=request method=\(Log.quote(completion.request.method)) route=\(route)"
        line += " target=\(Log.quote(String(completion.request.target.prefix(2048))))"
        line += " status=\(completion.status.map(String.init) ?? "none") bytes=\(completion.bytes)"
        line += " duration_ms=\(String(format: "%.2f", milliseconds)) peer=\(Log.quote(completion.request.peer))"
        if !completion.completed { line += " completed=false" }
        switch sink {
        case .standardError:
            Log.info(line)
        case .file(let fd):
            let stamped = "time=\(Self.time.format(Date())) level=info \(line)\n"
            writing.withLock { warned in
                // A full disk drops the line, never the request; said once.
                do {
                    try Posix.writeAll(fd, Array(stamped.utf8))
                } catch {
                    if !warned { Log.warning("event=access-log-failed error=\(Log.quote(String(describing: error)))") }
                    warned = true
                }
            }
        }
    }
}
