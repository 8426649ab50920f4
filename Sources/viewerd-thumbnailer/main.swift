// viewerd-thumbnailer: the desktop's thumbnail service (org.freedesktop.thumbnails.Thumbnailer1
// and Cache1 on the session bus), a front of viewerd. See docs/man/viewerd-thumbnailer.1.
import DesktopThumbnailer
import DesktopThumbnails
import Dispatch
import Foundation
import FreedesktopThumbnails
import ViewerClient
import ViewerLog

let usage = """
    usage: viewerd-thumbnailer [--socket PATH] [--cache DIR] [--bus ADDRESS] [--replace] [--idle-exit SECONDS]
                               [--helper-timeout SECONDS] [--helper-jobs N] [--no-helpers] [--log-level LEVEL]

    Serves org.freedesktop.thumbnails.Thumbnailer1 and Cache1 on the session bus, as Tumbler
    does: desktop apps (Thunar, Ristretto, …) queue files, viewerd renders them, and the
    thumbnails are written to $XDG_CACHE_HOME/thumbnails as the Thumbnail Managing Standard says.

      --socket PATH        viewerd's socket (default: $VIEWERD_SOCKET, the per-user daemon's,
                           else the system service's)
      --cache DIR          the thumbnail cache (default: $XDG_CACHE_HOME/thumbnails or
                           ~/.cache/thumbnails)
      --bus ADDRESS        a D-Bus address instead of the session bus
      --replace            take the names from an owner that allows it
      --idle-exit SECONDS  leave the bus after this long with nothing queued (D-Bus
                           activation starts it again); 0, the default: never
      --helper-timeout SECONDS
                           how long a desktop thumbnailer (the .thumbnailer files under
                           $XDG_DATA_DIRS/thumbnailers, run for the types viewerd does not
                           read) may run before it is killed (default: 30)
      --helper-jobs N      how many desktop thumbnailers may run at once (default: one
                           per core)
      --no-helpers         run no desktop thumbnailer
      --log-level LEVEL    debug, info, warning or error (default: $VIEWERD_LOG_LEVEL, else
                           info): info logs the start, the daemon it reaches, failures and a
                           line per Queue; debug adds a line per file
      --version, --help

    Logs go to standard error (the journal, under systemd), as viewerd's do.

    Exit status: 0 after SIGTERM or the idle time, 1 when the bus fails or the names are taken
    (by Tumbler, say), 64 on a usage error.

    """

func fail(_ text: String, status: Int32) -> Never {
    Log.failure(text, program: "viewerd-thumbnailer")
    exit(status)
}

/// A start that fails once the options are read: a log line, exit 1.
func failed(_ event: String, _ error: some CustomStringConvertible) -> Never {
    Log.error("event=\(event) error=\(Log.quote(error.description))")
    exit(1)
}

func logLevel(_ text: String, from origin: String) -> LogLevel {
    guard let level = LogLevel(name: text) else { fail("\(origin) \(text): expected debug, info, warning or error", status: 64) }
    return level
}

var arguments = Array(CommandLine.arguments.dropFirst())
var socket = ViewerConnection.defaultSocketPath()
var cacheRoot: String?
var busAddress: String?
var replace = false
var idleExit: Duration?
var helperTimeout: Duration = .seconds(30)
var useHelpers = true
var helperJobs = ProcessInfo.processInfo.activeProcessorCount
var level = ProcessInfo.processInfo.environment["VIEWERD_LOG_LEVEL"].map { logLevel($0, from: "VIEWERD_LOG_LEVEL") } ?? .info
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    func value() -> String {
        guard !arguments.isEmpty else { fail("\(argument) needs a value\n\(usage)", status: 64) }
        return arguments.removeFirst()
    }
    switch argument {
    case "--socket": socket = value()
    case "--cache": cacheRoot = value()
    case "--bus": busAddress = value()
    case "--replace": replace = true
    case "--idle-exit":
        let text = value()
        guard let seconds = Double(text), seconds >= 0 else { fail("--idle-exit \(text): not a number of seconds", status: 64) }
        idleExit = seconds > 0 ? .milliseconds(Int64(seconds * 1000)) : nil
    case "--helper-timeout":
        let text = value()
        guard let seconds = Double(text), seconds > 0 else { fail("--helper-timeout \(text): not a number of seconds", status: 64) }
        helperTimeout = .milliseconds(Int64(seconds * 1000))
    case "--helper-jobs":
        let text = value()
        guard let jobs = Int(text), jobs > 0 else { fail("--helper-jobs \(text): not a positive number", status: 64) }
        helperJobs = jobs
    case "--no-helpers": useHelpers = false
    case "--log-level": level = logLevel(value(), from: "--log-level")
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    case "--version":
        print("viewerd-thumbnailer 0.1.0")
        exit(0)
    default:
        fail("unknown argument \(argument)\n\(usage)", status: 64)
    }
}

Log.setThreshold(level)
let environment = ProcessInfo.processInfo.environment
guard let cache = cacheRoot.map({ ThumbnailCache(root: $0) }) ?? ThumbnailCache.forUser(environment: environment) else {
    fail("no cache directory: set XDG_CACHE_HOME or HOME, or give --cache DIR", status: 64)
}
let client = ViewerClient(socketPath: socket, clientName: "viewerd-thumbnailer")
let service: ThumbnailerService
do {
    let helpers = useHelpers ? HelperRunner(helpers: DesktopThumbnailers.installed(environment: environment),
                                           guessMimeType: DesktopThumbnailers.guessMimeType, timeout: helperTimeout,
                                           concurrency: helperJobs) : nil
    let writer = ThumbnailWriter(client: client, cache: cache, helpers: helpers)
    service = try ThumbnailerService(writer: writer, busAddress: busAddress, idleExit: idleExit)
} catch {
    failed("bus-failed", error)
}

/// SIGTERM (systemd, the end of the bus's session) and SIGINT stop the loop, which answers
/// what is queued. (A function, not top-level code: its handler must not be the main actor's.)
func stopOnSignals(_ service: ThumbnailerService) -> [DispatchSourceSignal] {
    [SIGTERM, SIGINT].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { service.stop() }
        source.resume()
        return source
    }
}
let signalSources = stopOnSignals(service)

do {
    try service.run(replace: replace)
} catch {
    failed("bus-failed", error)
}
Log.info("event=stopped")
withExtendedLifetime(signalSources) {}
