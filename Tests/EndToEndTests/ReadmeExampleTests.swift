import Foundation
import Testing

/// Issue 20, Must 5: the README's Swift example compiles as written. The ```swift blocks of
/// "Using it from a viewer (Swift)" go into a temporary package, its `Package.swift` built
/// from the README's dependency lines, next to a link named `viewerd` to this package (the
/// clone's directory name, whose clients/ViewerClient the README names); `swift build` builds
/// only that product (about 15 s on 2 cores), and prints no warning (issue 36: not libvips'
/// `-pthread`). VIEWERD_SKIP_README_BUILD=1 skips it.
@Suite("README's Swift example")
struct ReadmeExampleTests {
    static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path
    static let skip = ProcessInfo.processInfo.environment["VIEWERD_SKIP_README_BUILD"] == "1"

    /// The bodies of the ```swift blocks of the section whose `## ` heading is `title`.
    static func swiftBlocks(ofSection title: String, in markdown: String) -> [String] {
        var blocks: [String] = [], inSection = false, current: [Substring]? = nil
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil && line.hasPrefix("## ") { inSection = line == "## " + title; continue }
            guard inSection else { continue }
            if current == nil, line.hasPrefix("```swift") { current = []; continue }
            if current != nil, line.hasPrefix("```") { blocks.append(current!.joined(separator: "\n") + "\n"); current = nil; continue }
            current?.append(line)
        }
        return blocks
    }

    static func readmeBlocks() throws -> (manifest: String, program: String) {
        let readme = try String(contentsOfFile: packageRoot + "/README.md", encoding: .utf8)
        let blocks = swiftBlocks(ofSection: "Using it from a viewer (Swift)", in: readme)
        let manifest = blocks.filter { $0.contains(".package(") }
        let program = blocks.filter { $0.contains("import ViewerClient") }
        #expect(manifest.count == 1, "the section has one block of Package.swift lines")
        #expect(!program.isEmpty, "the section has a Swift example")
        return (manifest.first ?? "", program.joined(separator: "\n"))
    }

    @Test("the section's blocks are found")
    func extraction() throws {
        let (manifest, program) = try Self.readmeBlocks()
        #expect(manifest.contains(#".product(name: "ViewerClient", package: "ViewerClient")"#))
        #expect(program.contains("ViewerClient.connect"))
    }

    @Test("builds against the package, as a dependent package would",
          .disabled(if: skip, "VIEWERD_SKIP_README_BUILD=1: not building the README's Swift example"))
    func buildsAsDependent() throws {
        let (manifest, program) = try Self.readmeBlocks()
        let directory = try DaemonProcess.makeTemporaryDirectory(prefix: "viewerd-readme")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let files = FileManager.default
        try files.createSymbolicLink(atPath: directory + "/viewerd", withDestinationPath: Self.packageRoot)
        let app = directory + "/app"
        let sources = app + "/Sources/PhotoGrid"
        try files.createDirectory(atPath: sources, withIntermediateDirectories: true)
        try """
            // swift-tools-version:6.0
            import PackageDescription
            let package = Package(name: "app", platforms: [.macOS(.v15)],
            \(manifest))
            """.write(toFile: app + "/Package.swift", atomically: true, encoding: .utf8)
        try program.write(toFile: sources + "/main.swift", atomically: true, encoding: .utf8)
        let started = ContinuousClock.now
        let out = try runTool("/usr/bin/env", ["swift", "build", "--package-path", app, "--product", "PhotoGrid"],
                              timeout: .seconds(240))
        print("README example: swift build took \(ContinuousClock.now - started)")
        #expect(out.status == 0, "the README's Swift example does not build:\n\(out.stdout)\n\(out.stderr)")
        // Issue 36: a viewer's build prints no warning of ours. SwiftPM asks pkg-config about every
        // system library in the graph, used or not, and drops libvips' and GIO's `-pthread` with
        // "warning: prohibited flag(s)"; the client package (clients/ViewerClient) has none.
        let warnings = (out.stdout + "\n" + out.stderr).split(separator: "\n").filter { $0.contains("warning:") }
        #expect(warnings.isEmpty, "the README's Swift example builds with warnings:\n\(warnings.joined(separator: "\n"))")
    }
}
