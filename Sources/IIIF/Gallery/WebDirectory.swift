import Foundation

/// Where the gallery's page is when `--web-dir` does not say: beside the executable as it was
/// built or installed, so that every way of running viewerd-http serves its own page.
public enum WebDirectory {
    /// The installed page of a package (`/usr`): the last resort.
    public static let packaged = "/usr/share/viewerd/web"

    /// The first that holds `gallery/index.html`: the source tree's `web/` when `executable`
    /// is in its build (`…/.build/…`); `PREFIX/share/viewerd/web` when it is `PREFIX/bin/…`
    /// (`make install`'s /usr/local as much as a package's /usr); else `packaged`.
    public static func `default`(executable: String,
                                 hasPage: (String) -> Bool = { FileManager.default.fileExists(atPath: $0 + "/gallery/index.html") })
        -> String {
        var directory = URL(fileURLWithPath: executable).deletingLastPathComponent()
        let bin = directory
        while directory.path != "/" {
            if directory.lastPathComponent == ".build" {
                let web = directory.deletingLastPathComponent().appendingPathComponent("web").path
                if hasPage(web) { return web }
            }
            directory = directory.deletingLastPathComponent()
        }
        if bin.lastPathComponent == "bin" {
            let installed = bin.deletingLastPathComponent().appendingPathComponent("share/viewerd/web").path
            if hasPage(installed) { return installed }
        }
        return packaged
    }
}
