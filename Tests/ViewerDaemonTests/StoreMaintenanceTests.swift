import Foundation
import Rendering
import RenditionStore
import Testing
@testable import ViewerDaemon

@Suite("StoreMaintenance")
struct StoreMaintenanceTests {
    let identity = AssetIdentity(device: 1, inode: 2, size: 3, mtimeNanos: 4, ctimeNanos: 5)

    @Test("the sweep drops what changed, keeps what it cannot stat, and tells a vanished path apart")
    func verdicts() {
        var changed = identity
        changed.mtimeNanos += 1
        var chmodded = identity
        chmodded.ctimeNanos += 1
        #expect(StoreMaintenance.verdict(.found(identity), identity: identity.bytes) == .current)
        #expect(StoreMaintenance.verdict(.found(changed), identity: identity.bytes) == .changed)
        // A chmod or a rename changes only the change time, which is not in the identity.
        #expect(StoreMaintenance.verdict(.found(chmodded), identity: identity.bytes) == .current)
        // Deleted, or moved: the renditions stay for a request under the new name.
        #expect(StoreMaintenance.verdict(.gone, identity: identity.bytes) == .gone)
        // Another user's file, passed by descriptor: the daemon may not stat it.
        #expect(StoreMaintenance.verdict(.unknown(errno: EACCES), identity: identity.bytes) == .current)
    }

    @Test("a stat that fails for another reason than a missing file is unknown, not gone")
    func lookups() throws {
        let directory = NSTemporaryDirectory() + "viewerd-sweep-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let file = directory + "/a.jpg"
        _ = FileManager.default.createFile(atPath: file, contents: Data([1, 2, 3]))

        guard case .found(let found) = StoreMaintenance.Lookup(path: file) else { Issue.record("not found"); return }
        #expect(found.size == 3)
        #expect(StoreMaintenance.Lookup(path: directory + "/missing.jpg") == .gone)
        #expect(StoreMaintenance.Lookup(path: file + "/under-a-file.jpg") == .gone)
        // Root reads any directory, so EACCES cannot be made here; a name too long stands for it.
        let long = directory + "/" + String(repeating: "x", count: 300)
        #expect(StoreMaintenance.Lookup(path: long) == .unknown(errno: ENAMETOOLONG))
    }
}
