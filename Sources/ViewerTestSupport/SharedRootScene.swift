import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The stage of the multi-user cases (issue 14), shared by the end-to-end tests and the
/// torture: a daemon run by us (root) with `<dir>/shared` as its shared root, a directory
/// `<dir>/shared/incoming` that belongs to the other user, and `<dir>/secret`, ours alone
/// (0700), with an 800x600 image in it. The other user's client is `other`.
///
/// ```swift
/// let scene = try SharedRootScene(viewerd: DaemonProcess.executable("viewerd"), writeImage: Fixtures.write)
/// let answers = try scene.answers([scene.secretImage])       // ["…/secret.png": "error 201"]
/// ```
public final class SharedRootScene {
    public let directory: String
    public let shared: String
    public let incoming: String
    public let secret: String
    /// 800x600: its 256x256 rendition is 256x192, which tells it from the other user's images.
    public let secretImage: String
    public let daemon: DaemonProcess
    public let other: OtherUserClient
    private let writeImage: (String, Int, Int) throws -> Void

    /// Prepares the directories and starts the daemon (in `directory`, or a fresh temporary
    /// one removed with this object). Throws when the machine cannot run another user's
    /// client (`OtherUserClient.unavailableReason`).
    ///
    /// - Parameter writeImage: writes an image of (width, height) at a path.
    public init(viewerd: String = DaemonProcess.executable("viewerd"), directory: String? = nil,
                writeImage: @escaping (String, Int, Int) throws -> Void) throws {
        let owned = directory == nil
        let root = try directory ?? DaemonProcess.makeTemporaryDirectory()
        self.directory = root
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        chmod(root, 0o711)  // the other user reaches the socket and the root, lists nothing
        shared = root + "/shared"
        incoming = shared + "/incoming"
        secret = root + "/secret"
        for dir in [shared, incoming, secret] { try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true) }
        chmod(shared, 0o755)
        chmod(secret, 0o700)
        guard let other = OtherUserClient.available(in: root) else {
            throw DaemonProcess.Failure(OtherUserClient.unavailableReason ?? "cannot run a client as another user")
        }
        self.other = other
        chown(incoming, other.uid, other.gid)
        secretImage = secret + "/secret.png"
        try writeImage(secretImage, 800, 600)
        self.writeImage = writeImage
        daemon = DaemonProcess(name: "viewerd", executable: viewerd, directory: root,
                               arguments: ["--workers", "2", "--socket-group", "nogroup", "--shared-root", shared],
                               removesDirectory: owned)
        try daemon.start()
    }

    /// Writes an image of the other user's in `incoming`; returns its path.
    public func ownImage(_ name: String, width: Int, height: Int) throws -> String {
        let path = incoming + "/" + name
        try writeImage(path, width, height)
        chmod(path, 0o644)
        chown(path, other.uid, other.gid)
        return path
    }

    /// The other user's answers to RENDERs of `paths`: `[path: "result WxH" or "error CODE"]`.
    public func answers(_ paths: [String]) throws -> [String: String] {
        var found: [String: String] = [:]
        for line in try other.run(["render", daemon.socketPath] + paths) {
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count == 3 else { continue }
            found[parts[0]] = parts[1] + " " + parts[2]
        }
        return found
    }

    /// The other user swaps its own `x.png` (1000x1000, written here) with a symlink to the
    /// secret while asking for `x.png`, for `seconds`; returns the answers by kind
    /// (`"256x256"`, `"256x192"`, `"error 201"`…) and count.
    public func swapRace(seconds: Double) throws -> [String: Int] {
        _ = try ownImage("x.png", width: 1000, height: 1000)
        let lines = try other.run(["race", daemon.socketPath, incoming, secretImage, String(seconds)])
        var counts: [String: Int] = [:]
        for line in lines {
            guard let space = line.lastIndex(of: " "), let n = Int(line[line.index(after: space)...]) else { continue }
            counts[String(line[..<space])] = n
        }
        return counts
    }

    /// Symlinks in `incoming` for the symlink cases: name → target. The ones named `in-…`
    /// stay inside the root (pointing at `inside.png`, written here); `out-…` leave it.
    public func makeLinks() throws -> (inside: String, links: [String: String]) {
        let inside = try ownImage("inside.png", width: 300, height: 200)
        let links = [
            "in-relative.png": "inside.png",
            "in-absolute.png": inside,
            "out-secret.png": secretImage,
            "out-missing.png": secret + "/nonexistent.png",
            "out-dots.png": "../../secret/secret.png",
        ]
        for (name, target) in links {
            try FileManager.default.createSymbolicLink(atPath: incoming + "/" + name, withDestinationPath: target)
        }
        return (inside, links)
    }

    /// Paths outside the roots, existing or not, that must all answer permission-denied.
    public var outsidePaths: [String] {
        [secret + "/nonexistent.png", secretImage, shared + "/../secret/secret.png", incoming + "/../../secret/nonexistent.png"]
    }

    deinit { daemon.stop() }
}
