import Foundation
import ViewerClient
import ViewerProtocol

struct StatsCommand: Subcommand {
    static let name = "stats"
    static let abstract = "Print the daemon's counters (requests, hits, misses, renders, store use)."
    static let usage = "viewerctl stats [--json]"

    let json: Bool

    init(_ arguments: inout Arguments) throws(UsageError) {
        json = arguments.flag("--json")
        guard try arguments.positionals().isEmpty else { throw UsageError("stats takes no arguments") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let stats = try globals.connect().stats()
        if json {
            var counters: [String: UInt64] = [:]
            for (name, value) in stats.counters { counters[name] = value }
            try printJSON(counters)
            return ExitCode.success
        }
        let width = stats.counters.map(\.name.count).max() ?? 0
        for (name, value) in stats.counters {
            let shown = name.hasSuffix("_bytes") ? "\(value) (\(ByteCount.format(value)))" : "\(value)"
            print(name.padding(toLength: width, withPad: " ", startingAt: 0) + "  " + shown)
        }
        return ExitCode.success
    }
}
