import Foundation
import ViewerClient
import ViewerProtocol

struct LayoutCommand: Subcommand {
    static let name = "layout"
    static let abstract = "Print what a folder's files are, in one request, in name or newest-first order."
    static let usage = """
        viewerctl layout DIR [--order name|modified] [--offset N] [--limit N] [--json]

          One line per file of DIR (not its subfolders, not hidden files), in order:
          `INDEX PATH: KIND FORMAT WIDTHxHEIGHT` as `info` prints it, or `INDEX PATH: error:
          MESSAGE` for a file that failed. One LAYOUT request: what the daemon has stored
          comes at once, the rest as it reads the files.

          --order    name (the default: byte order of the names) or modified (newest first)
          --offset   files to skip at the start of the order (indexes still count from 0)
          --limit    files at most (default and most: 10000)
          --json     one JSON object: total (the folder's files) and items, an object per
                     file with index and the fields of `info --json`

          Exit 1 if any file failed (the others are printed all the same).
        """

    struct Output: Encodable {
        let total: UInt32
        let items: [InfoCommand.Entry]
    }

    let folder: String
    let order: LayoutOrder
    let offset: UInt32
    let limit: UInt32
    let json: Bool

    init(_ arguments: inout Arguments) throws(UsageError) {
        json = arguments.flag("--json")
        let orderName = try arguments.option("--order") ?? "name"
        guard let order = LayoutOrder.allCases.first(where: { $0.name == orderName }) else {
            throw UsageError("--order must be name or modified, not \(orderName)")
        }
        self.order = order
        offset = try Self.count(arguments.option("--offset"), "--offset")
        limit = try Self.count(arguments.option("--limit"), "--limit")
        let positionals = try arguments.positionals()
        guard positionals.count == 1 else { throw UsageError("layout needs one DIR") }
        folder = positionals[0]
    }

    private static func count(_ text: String?, _ name: String) throws(UsageError) -> UInt32 {
        guard let text else { return 0 }
        guard let value = UInt32(text) else { throw UsageError("\(name) must be a whole number, not \(text)") }
        return value
    }

    func run(_ globals: Globals) throws -> Int32 {
        let connection = try globals.connect()
        var final: [UInt32: LayoutItem] = [:]
        var total: UInt32 = 0
        do {
            _ = try connection.layout(LayoutRequest(folder: absolute(folder), order: order, offset: offset, limit: limit)) { batch in
                total = batch.total
                for item in batch.items { final[item.index] = item }
            }
        } catch ViewerClientError.server(let reply) {
            printError("\(folder): \(reply.message)")
            return ExitCode.failure
        }
        var entries: [InfoCommand.Entry] = []
        var failed = false
        for index in final.keys.sorted() {
            let item = final[index]!, path = item.path ?? ""
            var entry: InfoCommand.Entry
            switch item.outcome {
            case .info(let info):
                entry = InfoCommand.Entry(path: path, info: info)
                if !json { print("\(index) \(path): \(info.summary)") }
            case .failed(let reply):
                failed = true
                entry = InfoCommand.Entry(path: path, error: reply)
                if !json { print("\(index) \(path): error: \(reply.message)") }
            case .pending:
                throw ViewerClientError.protocolViolation("the LAYOUT ended with item \(index) still pending")
            }
            entry.index = index
            entries.append(entry)
        }
        if json { try printJSON(Output(total: total, items: entries)) }
        return failed ? ExitCode.failure : ExitCode.success
    }
}
