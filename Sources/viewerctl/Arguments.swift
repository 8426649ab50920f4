import Foundation
import ViewerClient

/// Exit codes (sysexits where they fit).
enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let usage: Int32 = 64
    static let unavailable: Int32 = 69
}

/// A mistake on the command line: printed on one line with where to read the usage, exit 64.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// The arguments of one subcommand, consumed as they are recognised. After `--`, every
/// argument is a positional one (a file named `-x.jpg`).
struct Arguments {
    private(set) var remaining: [String]
    /// What came after `--`.
    private var afterOptions: [String] = []

    init(_ arguments: [String]) {
        if let end = arguments.firstIndex(of: "--") {
            remaining = Array(arguments[..<end])
            afterOptions = Array(arguments[(end + 1)...])
        } else {
            remaining = arguments
        }
    }

    /// What is left, `--` and what followed it included (to hand on to a subcommand).
    var unparsed: [String] { afterOptions.isEmpty ? remaining : remaining + ["--"] + afterOptions }

    /// Whether `argument` is an option's name: it starts with a dash, and not with a dash and a
    /// digit (no option does), so `--time -1` and `--region -10,0,5,5` are values to check,
    /// not unknown options. A lone "-" is standard output.
    static func isOption(_ argument: String) -> Bool {
        guard argument.hasPrefix("-"), argument != "-" else { return false }
        let next = argument.dropFirst().first
        return !(next?.isNumber ?? false) && next != "."
    }

    /// The options a usage text names (`--size`, `-o`, ...), for `unknownOption`.
    static func options(inUsage usage: String) -> Set<String> {
        var found: Set<String> = ["--help", "-h"]
        for word in usage.split(whereSeparator: { " []|\n=".contains($0) }) where word.hasPrefix("-") && word.count > 1 {
            found.insert(String(word.prefix { $0.isLetter || $0.isNumber || $0 == "-" }))
        }
        return found
    }

    /// The first argument before `--` that looks like an option and is none of `known`, as a
    /// usage error that suggests the nearest known one ("unknown option --szie (did you mean
    /// --size?)"). Checked before a command parses, so a typo is named as such, not as the
    /// option it was meant to be missing.
    func unknownOption(known: Set<String>) -> UsageError? {
        for argument in remaining where Self.isOption(argument) {
            let name = argument.split(separator: "=", maxSplits: 1).first.map(String.init) ?? argument
            guard !known.contains(name) else { continue }
            return UsageError("unknown option \(name)\(Self.suggestion(for: name, among: known.filter { $0.hasPrefix("--") }))")
        }
        return nil
    }

    /// " (did you mean NEAREST?)" when one of `candidates` is within two edits of `word`, else "".
    static func suggestion(for word: String, among candidates: some Collection<String>) -> String {
        guard let nearest = candidates.min(by: { distance($0, word) < distance($1, word) }),
              distance(nearest, word) <= 2 else { return "" }
        return " (did you mean \(nearest)?)"
    }

    /// Levenshtein distance, for suggestions.
    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        var previous = Array(0...b.count)
        for i in 1...max(a.count, 1) where !a.isEmpty {
            var current = [i] + [Int](repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }

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
        if let unknown = remaining.first(where: Self.isOption) {
            throw UsageError("unknown option \(unknown)")
        }
        defer { (remaining, afterOptions) = ([], []) }
        return remaining + afterOptions
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
