import Foundation
import Rendering
import RenditionStore
import ViewerTestSupport

/// A real store in a temporary directory, and a small file there to key renditions by (its
/// identity) and to name them (its path): for tests of the daemon's use of the store.
final class StoreWithFile {
    let directory: TemporaryDirectory
    let store: RenditionStore
    let source: SourceFile

    init() throws {
        directory = try TemporaryDirectory()
        var configuration = StoreConfiguration(directory: directory.path, budgetBytes: 1 << 30)
        configuration.syncCommits = false
        store = try RenditionStore(configuration)
        let path = directory.path + "/photo.jpg"
        FileManager.default.createFile(atPath: path, contents: Data([1, 2, 3]))
        source = try SourceFile(path: path)
    }
}
