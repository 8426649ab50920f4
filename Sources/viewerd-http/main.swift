// viewerd-http: viewerd's renditions over HTTP/1.1 as the IIIF Image API, a client of the
// daemon (as viewerd-thumbnailer is) on libmicrohttpd (Sources/HTTPServer). See
// docs/man/viewerd-http.1.
import Dispatch
import Foundation
import HTTPServer
import SystemCalls
import ViewerClient
import ViewerLog

let options = FrontOptions.parse(Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment)
Log.setThreshold(options.level)
signal(SIGPIPE, SIG_IGN)

/// A start that fails once the options are read: a log line, exit 1.
func failed(_ event: String, _ error: some CustomStringConvertible) -> Never {
    Log.error("event=\(event) error=\(Log.quote(error.description))")
    exit(1)
}

let sockets: [Int32]
do {
    if let activated = try HTTPServer.activatedSockets() {
        if !options.listen.isEmpty { Log.warning("event=listen-ignored reason=\"systemd passed sockets (LISTEN_FDS)\"") }
        sockets = activated
    } else {
        sockets = try (options.listen.isEmpty ? ["127.0.0.1:8080"] : options.listen).map { try HTTPServer.listen($0) }
    }
} catch {
    failed("listen-failed", String(describing: error))
}

let accessLog: AccessLog?
do {
    accessLog = try options.accessLog.map { try AccessLog(destination: $0) }
} catch {
    failed("access-log-failed", String(describing: error))
}

// A connection and the file its request reads are a descriptor each: the soft limit's
// default 1024 would run out before --max-connections' 1000.
_ = Posix.raiseDescriptorLimit()
let front = Front(options: options, client: ViewerClient(socketPath: options.socket, clientName: "viewerd-http"), accessLog: accessLog)
/// The server over `sockets` with `front` as its handler. (A function, not top-level code: the
/// handler runs on MHD's threads, not the main actor's.)
func startServer(_ front: Front, sockets: [Int32], limits: HTTPServer.Limits) throws -> HTTPServer {
    try HTTPServer(sockets: sockets, limits: limits, completed: { front.completed($0) }) { request, reply in
        front.serve(request, reply: reply)
    }
}
let server: HTTPServer
do {
    server = try startServer(front, sockets: sockets, limits: options.limits)
} catch {
    failed("listen-failed", String(describing: error))
}
for fd in sockets {
    Log.info("event=listening address=\((try? HTTPServer.localAddress(of: fd)) ?? "descriptor-\(fd)")")
}
Log.info("event=started socket=\(Log.quote(options.socket)) roots=\(options.roots.count)")

/// SIGTERM (systemd) and SIGINT stop the server: it accepts nothing more, lets the replies
/// pending finish (5 s at most) and exits. (A function, not top-level code: its handler must
/// not be the main actor's.)
func stopOnSignals(_ stopped: DispatchSemaphore) -> [DispatchSourceSignal] {
    [SIGTERM, SIGINT].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { stopped.signal() }
        source.resume()
        return source
    }
}
let stopped = DispatchSemaphore(value: 0)
let signalSources = stopOnSignals(stopped)
stopped.wait()
server.stop()
Log.info("event=stopped")
withExtendedLifetime(signalSources) {}
exit(0)
