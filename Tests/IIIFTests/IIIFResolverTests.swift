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

    @Test("remembered listings answer as reading the directory does, see a change, and read an unchanged one once")
    func rememberedListings() throws {
        let listings = IIIFListings()
        let front = tree.front { $0.listings = listings }
        func path(_ identifier: String) -> String? { front.handle(get("/iiif/3/\(identifier)/info.json")).infoNeed?.path }
        #expect(path("photos%2F2024%2Fa")?.hasSuffix("/2024/a.jpg") == true)
        #expect(path("photos%2F2024%2Fb")?.hasSuffix("/2024/b.png") == true)
        #expect(path("photos%2F2024%2Fz") == nil)
        // A file added changes the directory: seen at once.
        try tree.write("root/2024/z.gif", "z")
        #expect(path("photos%2F2024%2Fz")?.hasSuffix("/2024/z.gif") == true)
        try tree.write("root/2024/b.jpg", "b jpeg")
        #expect(path("photos%2F2024%2Fb")?.hasSuffix("/2024/b.jpg") == true)
        // Unchanged, it is not read again: a name put in with the directory's modification
        // time set back (which only its owner can do; done here to see the read skipped) is
        // not seen.
        let directory = tree.root + "/2024"
        var before = stat()
        stat(directory, &before)
        try tree.write("root/2024/y.png", "y")
        var times = [before.st_atim, before.st_mtim]
        utimensat(AT_FDCWD, directory, &times, 0)
        #expect(path("photos%2F2024%2Fy") == nil, "the directory was read again")
        // Without listings every lookup reads (and so sees it).
        #expect(tree.front().handle(get("/iiif/3/photos%2F2024%2Fy/info.json")).infoNeed?.path.hasSuffix("/2024/y.png") == true)
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

    @Test("the file is opened beneath the root: a symlink out of it, as a swap after the check would put there, opens nothing")
    func openedBeneathTheRoot() throws {
        let rootReal = try #require(IIIFResolver.realPath(tree.root))
        #expect(IIIFResolver.openBeneath(rootReal, "2024/a.jpg") != nil)
        #expect(IIIFResolver.openBeneath(rootReal, "out-dir/secret.jpg") == nil, "a directory symlinked out of the root was followed")
        #expect(IIIFResolver.openBeneath(rootReal, "out-link.jpg") == nil)
        #expect(IIIFResolver.openBeneath(rootReal, "../outside/secret.jpg") == nil)
    }

    @Test("what the daemon is given is the file resolved, whatever its path names afterwards")
    func descriptorIsTheFileResolved() throws {
        let need = try #require(info("photos%2F2024%2Fa.jpg").infoNeed)
        let file = try #require(need.file, "no descriptor: the daemon would open the path again")
        try FileManager.default.removeItem(atPath: tree.root + "/2024/a.jpg")
        try FileManager.default.createSymbolicLink(atPath: tree.root + "/2024/a.jpg", withDestinationPath: tree.outside + "/secret.jpg")
        var status = stat()
        #expect(fstat(file.descriptor, &status) == 0)
        #expect(UInt64(status.st_ino) == need.identity.inode)
        var bytes = [UInt8](repeating: 0, count: 16)
        let count = pread(file.descriptor, &bytes, 16, 0)
        #expect(String(decoding: bytes.prefix(max(0, count)), as: UTF8.self) == "a jpeg")
    }
}
