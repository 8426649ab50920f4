import Foundation
import ViewerClient

/// Exit codes (sysexits where they fit).
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let unavailable: Int32 = 69
}

/// A mistake on the command line: printed with the subcommand's usage, exit 64.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The arguments of one subcommand, consumed as they are recognised.
struct Arguments {
    private(set) var remaining: [String]

    init(_ arguments: [String]) { remaining = arguments }

    /// Removes `--flag` if present.
    mutating func flag(_ names: String...) -> Bool {
        guard let index = remaining.firstIndex(where: { names.contains($0) }) else { return false }
        remaining.remove(at: index)
        return true
    }

    /// Removes `--option VALUE` (or `--option=VALUE`) and returns VALUE.
    mutating func option(_ names: String...) throws(UsageError) -> String? {
        for (index, argument) in remaining.enumerated() {
            for name in names {
                if argument == name {
                    guard index + 1 < remaining.count else { throw UsageError("\(name) needs a value") }
                    let value = remaining[index + 1]
                    remaining.removeSubrange(index...(index + 1))
                    return value
                }
                if argument.hasPrefix(name + "=") {
                    remaining.remove(at: index)
                    return String(argument.dropFirst(name.count + 1))
                }
            }
        }
        return nil
    }

    /// The positional arguments left, after checking no unknown option remains.
    mutating func positionals() throws(UsageError) -> [String] {
        if let unknown = remaining.first(where: { $0.hasPrefix("-") && $0 != "-" }) {
            throw UsageError("unknown option \(unknown)")
        }
        defer { remaining = [] }
        return remaining
    }
}

/// What every subcommand gets.
struct Globals {
    var socketPath: String
    /// How long to wait for the daemon's WELCOME (`VIEWERD_HANDSHAKE_TIMEOUT`, in seconds).
    var handshakeTimeout: Duration = ViewerConnection.defaultHandshakeTimeout

    /// A blocking connection to the daemon, handshake done.
    func connect() throws(ViewerClientError) -> ViewerConnection {
        try ViewerConnection(socketPath: socketPath, handshakeTimeout: handshakeTimeout)
    }

    /// The handshake timeout `VIEWERD_HANDSHAKE_TIMEOUT` asks for (seconds, e.g. 2.5), or the
    /// library's default when it is unset.
    static func handshakeTimeout(environment: [String: String]) throws(UsageError) -> Duration {
        guard let text = environment["VIEWERD_HANDSHAKE_TIMEOUT"], !text.isEmpty else {
            return ViewerConnection.defaultHandshakeTimeout
        }
        guard let seconds = Double(text), seconds > 0, seconds < 86_400 else {
            throw UsageError("VIEWERD_HANDSHAKE_TIMEOUT takes seconds, e.g. 2.5 (got \(text))")
        }
        return .milliseconds(Int64((seconds * 1000).rounded(.up)))
    }
}

/// One `viewerctl` subcommand.
protocol Subcommand {
    static var name: String { get }
    static var abstract: String { get }
    static var usage: String { get }
    /// Parses and validates; throws UsageError for exit 64.
    init(_ arguments: inout Arguments) throws(UsageError)
    /// Does the work; returns the exit code.
    func run(_ globals: Globals) throws -> Int32
}

func printError(_ message: String) {
    FileHandle.standardError.write(Data("viewerctl: \(message)\n".utf8))
}
