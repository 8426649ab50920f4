import Foundation
import Testing
import ViewerProtocol

/// Every input the fuzz target (torture/fuzz) ever crashed on, kept in FuzzRegressions/, and
/// the golden vectors, run through the fuzz target's checks: the decoder and the parser never
/// trap, and every message that parses survives an encode and a parse unchanged.
@Suite("Fuzz regressions")
struct FuzzRegressionTests {
    static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("FuzzRegressions")
    static let vectors = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../protocol/vectors").standardized

    static func inputs(in directory: URL) -> [URL] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { !$0.hasSuffix(".md") }.sorted().map { directory.appendingPathComponent($0) }
    }

    @Test("each kept crash input decodes without crashing, and what parses round-trips")
    func regressions() throws {
        for url in Self.inputs(in: Self.directory) {
            let data = [UInt8](try Data(contentsOf: url))
            Self.check(data, name: url.lastPathComponent)
        }
    }

    @Test("the golden vectors pass the fuzz target's checks, whole and in 1- to 32-byte reads")
    func vectors() throws {
        let files = Self.inputs(in: Self.vectors).filter { $0.pathExtension == "bin" }
        #expect(files.count > 10)
        for url in files {
            let frame = [UInt8](try Data(contentsOf: url))
            for control: UInt8 in [0x80, 0x9F, 0x00, 0x1F] { Self.check([control] + frame, name: url.lastPathComponent) }
        }
    }

    /// The fuzz target's own run of one input (FuzzInput.swift), a failed check recorded.
    static func check(_ data: [UInt8], name: String) {
        FuzzInput.run(data) { Issue.record("\(name): \($0)") }
    }
}
