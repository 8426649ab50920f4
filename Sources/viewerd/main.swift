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
      --render-threads N     renders at once (default: one per core)
      --max-pixels N         largest source accepted, width x height x pages (default: 256000000)
      --version              print the version and exit
      --help                 print this help and exit

    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("viewerd: \(message)\n".utf8))
    exit(code)
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
    case "--render-threads":
        guard let n = Int(value(for: argument)), (1...256).contains(n) else { fail("--render-threads needs 1-256", code: 64) }
        configuration.renderThreads = n
    case "--max-pixels":
        guard let n = UInt64(value(for: argument)), n > 0 else { fail("--max-pixels needs a positive number", code: 64) }
        configuration.limits.maxSourcePixels = n
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
