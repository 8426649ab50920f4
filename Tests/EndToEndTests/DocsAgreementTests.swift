import Foundation
import Testing

/// `--help`, the man pages and the bash completion say the same things (issue 20, Must 8):
/// every command, option, environment variable and exit status each of them lists is in the
/// others. The help text is the source; this test is what keeps the rest from drifting.
@Suite("Help, man pages and completion agree")
struct DocsAgreementTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    static func read(_ relative: String) throws -> String {
        try String(contentsOfFile: repository + "/" + relative, encoding: .utf8)
    }

    /// A man page's text with roff escapes and font changes taken out (`\-` is `-`).
    static func plain(_ roff: String) -> String {
        roff.replacingOccurrences(of: "\\-", with: "-")
            .replacingOccurrences(of: #"\\f[BIRP]"#, with: "", options: .regularExpression)
    }

    /// The `--long` options (and `-o`) a text names.
    static func options(in text: String) -> Set<String> {
        let regex = try! NSRegularExpression(pattern: #"(?<![\w-])(--[a-z][a-z-]*|-o)(?![\w-])"#)
        let range = NSRange(text.startIndex..., in: text)
        return Set(regex.matches(in: text, range: range).map { String(text[Range($0.range(at: 1), in: text)!]) })
    }

    /// The `.SH NAME` section of a man page, up to the next one.
    static func section(_ name: String, of man: String) -> String {
        guard let start = man.range(of: ".SH \(name)\n") else { return "" }
        let rest = man[start.upperBound...]
        return String(rest[..<(rest.range(of: "\n.SH ")?.lowerBound ?? rest.endIndex)])
    }

    static func help(_ tool: String, _ arguments: [String]) throws -> String {
        let run = try runTool(DaemonProcess.executable(tool), arguments)
        return run.stdout
    }

    @Test("viewerctl: each command and its options in --help, viewerctl(1) and the completion")
    func viewerctlCommands() throws {
        let top = try Self.help("viewerctl", ["--help"])
        let man = try Self.read("docs/man/viewerctl.1")
        let completion = try Self.read("completion/viewerctl.bash")
        let zshCompletion = try Self.read("completion/_viewerctl"), fishCompletion = try Self.read("completion/viewerctl.fish")
        let commandsBlock = top.components(separatedBy: "commands:\n")[1].components(separatedBy: "\n\n")[0]
        let commands = commandsBlock.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
        #expect(commands.count >= 8, "\(top)")
        let listed = completion.components(separatedBy: "local commands=\"")[1].components(separatedBy: "\"")[0]
        #expect(Set(listed.split(separator: " ").map(String.init)) == Set(commands + ["help"]), "completion's command list")
        let manCommands = Self.plain(Self.section("COMMANDS", of: man))
        for command in commands {
            let help = try Self.help("viewerctl", [command, "--help"])
            let helpOptions = Self.options(in: help).union(["--help"])
            // The man page: the command's entry (from its line to the next .TP)
            guard let entry = manCommands.components(separatedBy: ".TP\n").first(where: { $0.hasPrefix(command + " ") || $0.hasPrefix(command + "\n") }) else {
                Issue.record("viewerctl(1) has no entry for \(command)")
                continue
            }
            let manOptions = Self.options(in: entry).union(["--help"])
            #expect(helpOptions == manOptions, "\(command): --help has \(helpOptions.sorted()), viewerctl(1) \(manOptions.sorted())")
            // The completion: the options it offers after the command
            let pattern = "\n        \(command)) options=\""
            let offered: Set<String>
            if let start = completion.range(of: pattern) {
                offered = Set(completion[start.upperBound...].prefix { $0 != "\"" }.split(separator: " ").map(String.init))
            } else if let start = completion.range(of: "|\(command)) options=\"") {
                offered = Set(completion[start.upperBound...].prefix { $0 != "\"" }.split(separator: " ").map(String.init))
            } else {
                offered = ["--help"]
            }
            #expect(helpOptions == offered, "\(command): --help has \(helpOptions.sorted()), the completion \(offered.sorted())")
            // zsh's and fish's offer the same
            let zsh = Self.words(in: zshCompletion, after: "\n        \(command)) options=(", upTo: ")")
            #expect(zsh == offered || (zsh.isEmpty && offered == ["--help"]), "\(command): zsh's completion \(zsh.sorted())")
            let fish = Self.words(in: fishCompletion, after: "\n__viewerctl_command_options \(command) ", upTo: "\n")
            #expect(fish == offered, "\(command): fish's completion \(fish.sorted())")
        }
        #expect(Set(Self.words(in: zshCompletion, after: "commands=(", upTo: ")")) == Set(commands + ["help"]), "zsh's command list")
        #expect(Set(Self.words(in: fishCompletion, after: "set -l commands ", upTo: "\n")) == Set(commands + ["help"]), "fish's command list")
    }

    /// The words of `text` between `start` and the next `end`; none when `start` is not there.
    static func words(in text: String, after start: String, upTo end: Character) -> Set<String> {
        guard let found = text.range(of: start) else { return [] }
        return Set(text[found.upperBound...].prefix { $0 != end }.split(separator: " ").map(String.init))
    }

    @Test("viewerctl: global options, environment and exit statuses in --help and viewerctl(1)")
    func viewerctlGlobals() throws {
        let top = try Self.help("viewerctl", ["--help"])
        let man = try Self.read("docs/man/viewerctl.1")
        let globalHelp = top.components(separatedBy: "global options:\n")[1].components(separatedBy: "\n\n")[0]
        #expect(Self.options(in: globalHelp).subtracting(["--shared-roots"]) == Self.options(in: Self.plain(Self.section("OPTIONS", of: man))))
        let variables = { (text: String) in
            Set(text.split(whereSeparator: { !$0.isLetter && $0 != "_" }).map(String.init).filter { $0.hasPrefix("VIEWERD_") })
        }
        let helpEnvironment = top.components(separatedBy: "environment:\n")[1].components(separatedBy: "\n\n")[0]
        #expect(variables(helpEnvironment) == variables(Self.section("ENVIRONMENT", of: man)))
        let statuses = { (text: String) in
            Set(text.split(whereSeparator: { !$0.isNumber }).compactMap { Int($0) }.filter { $0 == 0 || $0 == 1 || $0 >= 60 })
        }
        let helpStatuses = top.components(separatedBy: "exit codes:")[1].components(separatedBy: "\n\n")[0]
        #expect(statuses(helpStatuses) == statuses(Self.section("EXIT STATUS", of: man)),
                "--help: \(statuses(helpStatuses).sorted()), viewerctl(1): \(statuses(Self.section("EXIT STATUS", of: man)).sorted())")
    }

    @Test("viewerd: every flag of --help is in viewerd(8), and the reverse")
    func viewerdFlags() throws {
        let help = try Self.help("viewerd", ["--help"])
        let man = Self.plain(try Self.read("docs/man/viewerd.8"))
        let manOptions = Self.options(in: Self.section("OPTIONS", of: man))
        #expect(Self.options(in: help) == manOptions,
                "only in --help: \(Self.options(in: help).subtracting(manOptions).sorted()); only in viewerd(8): \(manOptions.subtracting(Self.options(in: help)).sorted())")
        for default_ in ["$RUNTIME_DIRECTORY", "$CACHE_DIRECTORY", "$XDG_RUNTIME_DIR", "$XDG_CACHE_HOME"] where help.contains(default_) {
            #expect(man.contains(default_), "viewerd --help names \(default_) as a default; viewerd(8) does not")
        }
    }

    @Test("viewerd-http: every option of --help is in viewerd-http(1), and the reverse")
    func viewerdHTTPOptions() throws {
        let help = try Self.help("viewerd-http", ["--help"])
        let man = Self.plain(try Self.read("docs/man/viewerd-http.1"))
        let manOptions = Self.options(in: Self.section("OPTIONS", of: man))
        #expect(Self.options(in: help) == manOptions,
                "only in --help: \(Self.options(in: help).subtracting(manOptions).sorted()); only in viewerd-http(1): \(manOptions.subtracting(Self.options(in: help)).sorted())")
    }

    @Test("the completion completes file names with spaces as one word")
    func completionWithSpaces() throws {
        let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-completion")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = FileManager.default.createFile(atPath: directory + "/my photo.jpg", contents: Data())
        try FileManager.default.createDirectory(atPath: directory + "/my album", withIntermediateDirectories: true)
        let script = """
            source '\(Self.repository)/completion/viewerctl.bash'
            complete() { :; }
            COMP_WORDS=(viewerctl render '\(directory)/my'); COMP_CWORD=2
            _viewerctl
            printf '%s\\n' "${COMPREPLY[@]}"
            """
        let run = try runTool("/bin/bash", ["-c", script])
        let words = Set(run.stdout.split(separator: "\n").map(String.init))
        #expect(words.contains(directory + "/my photo.jpg"), "\(words)")
        #expect(words.contains(directory + "/my album") || words.contains(directory + "/my album/"), "\(words)")
        #expect(!words.contains(directory + "/my"), "split at the space: \(words)")
    }
}
