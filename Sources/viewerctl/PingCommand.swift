import ViewerClient

struct PingCommand: Subcommand {
    static let name = "ping"
    static let abstract = "Check that viewerd answers, and how fast."
    static let usage = "viewerctl ping"

    init(_ arguments: inout Arguments) throws(UsageError) {
        guard try arguments.positionals().isEmpty else { throw UsageError("ping takes no arguments") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let connection = try globals.connect()
        let elapsed = try connection.ping()
        let micros = Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6
        print("viewerd \(connection.welcome.serverVersion) (protocol \(connection.welcome.version)) " +
              "answered in \(Int(micros.rounded())) µs")
        return ExitCode.success
    }
}
