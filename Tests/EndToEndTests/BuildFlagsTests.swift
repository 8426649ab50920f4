import Foundation
import Testing

/// Issue 36, Must 1: a build in a terminal and one without are the same build. SwiftPM gives the
/// compiler `-color-diagnostics` when its output is a terminal, and a changed compiler flag
/// rebuilds every module (swift-package-manager#8253): `make run` typed in a terminal rebuilt
/// all of a `make test` or CI build, and back. So every `swift build` and `swift test` the
/// Makefile and the scripts run says `--no-color-diagnostics`. (That the flag keeps the build
/// description unchanged was measured, not tested here: a second build would take minutes.)
@Suite("The build's swift calls")
struct BuildFlagsTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    /// Where the project runs swift: the Makefile, CI and the scripts of bench/, torture/, tools/.
    static func buildFiles() throws -> [String] {
        var files = ["Makefile", ".ci/run"]
        for directory in ["bench", "torture", "tools"] {
            let names = try FileManager.default.contentsOfDirectory(atPath: repository + "/" + directory)
            files += names.filter { $0.hasSuffix(".sh") }.sorted().map { directory + "/" + $0 }
        }
        return files
    }

    /// The lines of `text` that call `swift build`, `swift test` or `swift run` (which builds
    /// too), however swift is named (`$(SWIFT) build`, `$SWIFT test`, `${SWIFT} run`,
    /// `"$SWIFT" build`, plain `swift build`), comments left out.
    static func swiftCalls(in text: String) -> [String] {
        let call = try! NSRegularExpression(pattern: #"(\bswift|\$\(SWIFT\)|\$\{SWIFT\}|\$SWIFT)"?\s+(build|test|run)\b"#)
        return text.split(separator: "\n").map(String.init).filter { line in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard !trimmed.hasPrefix("#") else { return false }
            return call.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil
        }
    }

    @Test("a swift call is found however it is written, and only a call")
    func callsFound() {
        let calls = ["swift build -c release", "\t$(SWIFT) test --skip-build", "$SWIFT build", "${SWIFT} build --product viewerd",
                     "\"$SWIFT\" test", "swift run viewerd-bench", "${SWIFT} run viewerctl status"]
        for line in calls { #expect(Self.swiftCalls(in: line) == [line], "\(line)") }
        for line in ["# swift build", "swiftc -O x.swift", "swift --version", "echo build swift"] {
            #expect(Self.swiftCalls(in: line).isEmpty, "\(line)")
        }
    }

    @Test("every swift build, test and run says --no-color-diagnostics")
    func sameFlagsInAndOutOfATerminal() throws {
        var calls = 0
        for file in try Self.buildFiles() {
            let text = try String(contentsOfFile: Self.repository + "/" + file, encoding: .utf8)
            for line in Self.swiftCalls(in: text) {
                calls += 1
                #expect(line.contains("--no-color-diagnostics"),
                        "\(file): a swift call without --no-color-diagnostics (a terminal would rebuild everything): \(line)")
            }
        }
        #expect(calls >= 2, "the swift calls are found, the Makefile's SWIFT_BUILD and SWIFT_TEST among them (\(calls))")
    }
}
