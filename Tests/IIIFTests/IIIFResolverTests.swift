import Foundation
import HTTPMessage
import Testing
@testable import IIIF

/// Identifiers to files on a real temporary tree: what is served, what is 400, and one 404,
/// byte for byte, whether or not something exists outside the root.
@Suite("IIIFResolver")
struct IIIFResolverTests {
    let tree: TemporaryTree
    init() throws { tree = try TemporaryTree() }

    func info(_ identifier: String) -> IIIFStep {
        tree.front().handle(get("/iiif/3/\(identifier)/info.json"))
    }

    @Test("a percent-encoded ROOT/relative/path is the file under the root, its identity fstat'ed")
    func resolves() throws {
        let need = try #require(info("photos%2F2024%2Fa.jpg").infoNeed)
        let real = try #require(IIIFResolver.realPath(tree.root + "/2024/a.jpg"))
        #expect(need.path == real)
        let attributes = try FileManager.default.attributesOfItem(atPath: real)
        #expect(need.identity.size == 6 && need.identity.inode == (attributes[.systemFileNumber] as? NSNumber)?.uint64Value)
        #expect(info("photos%2F2024%2Fsub%2Fc.jpg").infoNeed?.path.hasSuffix("/2024/sub/c.jpg") == true)
        #expect(info("photos%2Fname%20with%20space.jpg").infoNeed != nil)
        // A symlink that stays inside the root is followed.
        #expect(info("photos%2Finside-link.jpg").infoNeed?.path == real)
        // Escaped unreserved characters decode (the validator's %2D).
        #expect(info("photos%2F2024%2F%61.jpg").infoNeed?.path == real)
    }

    @Test("the suffix is optional: the first a.SUFFIX in byte order is taken")
    func optionalSuffix() throws {
        #expect(info("photos%2F2024%2Fa").infoNeed?.path.hasSuffix("/2024/a.jpg") == true)
        // b.png and b.webp: png sorts first.
        #expect(info("photos%2F2024%2Fb").infoNeed?.path.hasSuffix("/2024/b.png") == true)
        #expect(info("photos%2F2024%2Fz").status == 404)
    }

    @Test("outside the root, missing, a directory, an unknown root: one 404, the same bytes", arguments: [
        "photos%2Fout-link.jpg",             // a symlink to a file that exists outside
        "photos%2Fdangling.jpg",             // a symlink to a file that does not
        "photos%2Fout-dir%2Fsecret.jpg",     // through a symlinked directory, existing
        "photos%2Fout-dir%2Fmissing.jpg",    // and missing
        "photos%2Fout-dir%2Fsecret",         // the suffix search outside
        "photos%2Fmissing.jpg",
        "photos%2F2024",                     // a directory
        "photos%2F2024%2Fsub",
        "nosuchroot%2F2024%2Fa.jpg",
        "photos",                            // the root alone
        "a%2Fb",
    ])
    func oneNotFound(_ identifier: String) throws {
        let response = try #require(info(identifier).response)
        let reference = try #require(info("photos%2Fmissing.jpg").response)
        #expect(response.status == 404)
        #expect(response.body == reference.body && response.headers == reference.headers)
    }

    @Test("a root is contained byte for byte: a sibling spelled with the same letters decomposed (NFD) is outside it")
    func rootContainedByBytes() throws {
        let manager = FileManager.default
        let composed = tree.top.path + "/caf\u{E9}", decomposed = tree.top.path + "/cafe\u{301}"
        try manager.createDirectory(atPath: composed, withIntermediateDirectories: true)
        try manager.createDirectory(atPath: decomposed, withIntermediateDirectories: true)
        // (Counted as entries: a Set of Strings would count the two spellings as one.)
        try #require(try manager.contentsOfDirectory(atPath: tree.top.path).count == 4, "two directories, not one")
        try Data("private".utf8).write(to: URL(fileURLWithPath: decomposed + "/private.jpg"))
        try manager.createSymbolicLink(atPath: composed + "/link.jpg", withDestinationPath: decomposed + "/private.jpg")
        let front = tree.front { $0.roots = ["c": composed] }
        // Swift's String compares canonically equivalent spellings as equal: "cafe\u{301}/…" has the prefix "café/".
        #expect(front.handle(get("/iiif/3/c%2Flink.jpg/info.json")).response?.status == 404)
    }

    @Test("traversal, NUL, empty segments and over-long paths are 400 before any look", arguments: [
        "photos%2F..%2Foutside%2Fsecret.jpg", "photos%2F..%2F..%2Fetc%2Fpasswd", "photos%2F.%2F2024%2Fa.jpg",
        "photos%2F2024%2F%2Fa.jpg", "photos%2F", "photos%2F2024%2Fa.jpg%00.png", "photos%2F%2e%2e%2Fx",
        "photos%2F" + String(repeating: "x", count: 256), "photos%2F" + Array(repeating: "abcdefgh", count: 600).joined(separator: "%2F"),
        "photos%2F[frob]", "photos%2Fa b", "photos%2F%zz", "photos%2F%C3%28",
    ])
    func badRequest(_ identifier: String) {
        #expect(info(identifier).status == 400)
    }

    @Test("a changed file changes the identity")
    func changedIdentity() throws {
        let before = try #require(info("photos%2F2024%2Fa.jpg").infoNeed).identity
        try tree.write("root/2024/a.jpg", "a longer jpeg")
        let after = try #require(info("photos%2F2024%2Fa.jpg").infoNeed).identity
        #expect(before != after)
    }
}
