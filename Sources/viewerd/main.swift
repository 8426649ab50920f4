// viewerd: the rendition cache daemon. Thin: parses flags, builds a Configuration, runs.
import Foundation
import ViewerDaemon
import ViewerProtocol

let usage = """
    usage: viewerd [options]

    Serves thumbnails and other renditions of image files to viewers over a Unix socket.

    options:
      --socket PATH          listening socket (default: $XDG_RUNTIME_DIR/viewerd/viewerd.sock,
                             else /tmp/viewerd-$UID/viewerd.sock)
      --cache-dir DIR        rendition store (default: $XDG_CACHE_HOME/viewerd, else ~/.cache/viewerd)
      --cache-budget SIZE    disk budget of the store, e.g. 512M, 2G (default: 1G)
      --memory-budget SIZE   memory renders in flight may use together, by estimate (default: 1G)
      --workers N            decode worker processes, i.e. renders at once (default: one per core)
      --job-timeout SECONDS  wall-clock limit of one render; the worker is killed past it (default: 30)
      --max-pixels N         largest source accepted, width x height x pages (default: 256000000)
      --socket-group GROUP   let GROUP's members connect (socket mode 0660; default 0600, owner only)
      --shared-root DIR      other users' clients may name files under DIR by path (repeatable);
                             elsewhere they must pass an open descriptor
      --version              print the version and exit
      --help                 print this help and exit

    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("viewerd: \(message)\n".utf8))
    exit(code)
}

// The decode worker is this same executable, started by the daemon.
if CommandLine.arguments.dropFirst().first == "--worker" {
    exit(WorkerProcess.run(arguments: Array(CommandLine.arguments.dropFirst(2))))
}

var configuration = Configuration.defaults()
var arguments = CommandLine.arguments.dropFirst()
@MainActor func value(for flag: String) -> String {
    guard let value = arguments.popFirst() else { fail("\(flag) needs a value\n\n\(usage)", code: 64) }
    return value
}
while let argument = arguments.popFirst() {
    switch argument {
    case "--socket": configuration.socketPath = value(for: argument)
    case "--cache-dir": configuration.cacheDirectory = value(for: argument)
    case "--cache-budget":
        guard let size = ByteCount.parse(value(for: argument)), size > 0 else { fail("--cache-budget needs a size like 512M", code: 64) }
        configuration.cacheBudgetBytes = size
    case "--workers", "--render-threads":
        guard let n = Int(value(for: argument)), (1...256).contains(n) else { fail("\(argument) needs 1-256", code: 64) }
        configuration.renderThreads = n
    case "--memory-budget":
        guard let size = ByteCount.parse(value(for: argument)), size > 0 else { fail("--memory-budget needs a size like 512M", code: 64) }
        configuration.memoryBudget = size
    case "--job-timeout":
        guard let n = Double(value(for: argument)), n > 0 else { fail("--job-timeout needs a positive number of seconds", code: 64) }
        configuration.jobTimeout = .milliseconds(Int(n * 1000))
    case "--max-pixels":
        guard let n = UInt64(value(for: argument)), n > 0 else { fail("--max-pixels needs a positive number", code: 64) }
        configuration.limits.maxSourcePixels = n
    case "--socket-group": configuration.socketGroup = value(for: argument)
    case "--shared-root":
        let root = value(for: argument)
        guard root.hasPrefix("/") else { fail("--shared-root needs an absolute path", code: 64) }
        configuration.sharedRoots.append(root)
    case "--version":
        print("viewerd \(viewerdVersion) (protocol \(ProtocolVersion.current))")
        exit(0)
    case "--help", "-h":
        print(usage, terminator: "")
        exit(0)
    default:
        fail("unknown option \(argument)\n\n\(usage)", code: 64)
    }
}
guard configuration.socketPath.hasPrefix("/") else { fail("--socket needs an absolute path", code: 64) }
guard configuration.cacheDirectory.hasPrefix("/") else { fail("--cache-dir needs an absolute path", code: 64) }

do {
    let daemon = try Daemon(configuration: configuration)
    daemon.run()
} catch {
    fail("\(error)", code: 1)
}
