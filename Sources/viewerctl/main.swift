// viewerctl: drive viewerd from a shell.
import Foundation
import ViewerClient
import ViewerProtocol

let commands: [any Subcommand.Type] = [
    RenderCommand.self, TileCommand.self, InfoCommand.self, LayoutCommand.self, WarmCommand.self, StatsCommand.self, StatusCommand.self,
    InvalidateCommand.self, TrimCommand.self, ClearCommand.self, PingCommand.self, ExportXDGCommand.self,
]

/// The width of the command names' column in the help: the longest name and two spaces.
let commandColumn = commands.map { $0.name.count }.max()! + 2

let topUsage = """
    usage: viewerctl [--socket PATH] COMMAND [options]

    Talks to viewerd, the thumbnail and rendition cache daemon.

    commands:
    \(commands.map { "  " + $0.name.padding(toLength: commandColumn, withPad: " ", startingAt: 0) + $0.abstract }.joined(separator: "\n"))

    global options:
      --socket PATH   the daemon's socket (default: $VIEWERD_SOCKET; else the per-user daemon's,
                      $XDG_RUNTIME_DIR/viewerd/viewerd.sock or /tmp/viewerd-$UID/viewerd.sock,
                      if it exists; else the system service's /run/viewerd/viewerd.sock if that
                      exists; else the per-user one)
      --version       print the version
      --help          this help; `viewerctl COMMAND --help` for a command's options

    environment:
      VIEWERD_SOCKET             the daemon's socket, when --socket is not given
      VIEWERD_HANDSHAKE_TIMEOUT  seconds to wait for the daemon to answer the handshake (default 10);
                                 then viewerctl gives up with exit 69

    exit codes: 0 success, 1 failure, 64 usage error, 69 daemon unavailable (or not answering),
                130 interrupted (Ctrl-C)

    """

@MainActor func main() -> Int32 {
    var arguments = Arguments(Array(CommandLine.arguments.dropFirst()))
    let socketOption: String?
    let handshakeTimeout: Duration
    do throws(UsageError) {
        socketOption = try arguments.option("--socket")
        handshakeTimeout = try Globals.handshakeTimeout(environment: ProcessInfo.processInfo.environment)
    } catch {
        printError(error.message)
        return ExitCode.usage
    }
    var rest = arguments.unparsed
    guard let name = rest.first else {
        FileHandle.standardError.write(Data(topUsage.utf8))
        return ExitCode.usage
    }
    rest.removeFirst()
    if name == "--help" || name == "-h" || name == "help" {
        // `viewerctl help render` is `viewerctl render --help`.
        if let topic = rest.first, let command = commands.first(where: { $0.name == topic }) {
            print("\(command.abstract)\n\nusage: \(command.usage)")
            return ExitCode.success
        }
        print(topUsage, terminator: "")
        return ExitCode.success
    }
    if name == "--version" {
        print("viewerctl 0.1.0 (protocol \(ProtocolVersion.current))")
        return ExitCode.success
    }
    guard let command = commands.first(where: { $0.name == name }) else {
        let hint = Arguments.suggestion(for: name, among: commands.map { $0.name } + ["help"])
        printError("unknown command \(name)\(hint); see viewerctl --help")
        return ExitCode.usage
    }
    if rest.contains("--help") || rest.contains("-h") {
        print("\(command.abstract)\n\nusage: \(command.usage)")
        return ExitCode.success
    }
    var commandArguments = Arguments(rest)
    // A usage error is one line: the mistake, then where the usage is (not the whole of it).
    if let unknown = commandArguments.unknownOption(known: Arguments.options(inUsage: command.usage)) {
        printError("\(unknown.message); see viewerctl \(name) --help")
        return ExitCode.usage
    }
    let parsed: any Subcommand
    do throws(UsageError) {
        parsed = try command.init(&commandArguments)
    } catch {
        printError("\(error.message); see viewerctl \(name) --help")
        return ExitCode.usage
    }
    let globals = Globals(socketPath: socketOption ?? ViewerConnection.defaultSocketPath(), handshakeTimeout: handshakeTimeout)
    do {
        return try parsed.run(globals)
    } catch let error as ViewerClientError {
        printError(error.description)
        if case .unavailable = error { return ExitCode.unavailable }
        return ExitCode.failure
    } catch {
        printError("\(error)")
        return ExitCode.failure
    }
}

exit(main())
