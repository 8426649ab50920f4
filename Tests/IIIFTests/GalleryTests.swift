import Foundation
import HTTPMessage
import Testing
import ViewerProtocol
@testable import IIIF

/// The gallery's rules and the media files on a real temporary tree (TemporaryTree, and a web
/// directory beside it): what is served, the ranges, and one 404 whatever is outside.
@Suite("Gallery and media")
struct GalleryTests {
    @Test("the page's default directory: the build's source tree, then PREFIX/share beside PREFIX/bin, then the package's")
    func defaultWebDirectory() {
        let pages: Set<String> = ["/src/viewerd/web", "/usr/local/share/viewerd/web", "/opt/v/share/viewerd/web"]
        let has = { pages.contains($0) }
        #expect(WebDirectory.default(executable: "/src/viewerd/.build/x86_64-unknown-linux-gnu/debug/viewerd-http", hasPage: has)
                == "/src/viewerd/web")
        // make install's PREFIX=/usr/local: its own page, not the package's (which may be absent or older).
        #expect(WebDirectory.default(executable: "/usr/local/bin/viewerd-http", hasPage: has) == "/usr/local/share/viewerd/web")
        #expect(WebDirectory.default(executable: "/opt/v/bin/viewerd-http", hasPage: has) == "/opt/v/share/viewerd/web")
        #expect(WebDirectory.default(executable: "/usr/bin/viewerd-http", hasPage: has) == WebDirectory.packaged)
        #expect(WebDirectory.default(executable: "/home/me/tools/viewerd-http", hasPage: has) == WebDirectory.packaged)
        // A build whose tree has no page (a copied binary) falls through to the installed ones.
        #expect(WebDirectory.default(executable: "/elsewhere/.build/release/viewerd-http", hasPage: has) == WebDirectory.packaged)
    }

    let tree: TemporaryTree
    let web: String

    init() throws {
        tree = try TemporaryTree()
        web = tree.top.appendingPathComponent("web").path
        try FileManager.default.createDirectory(atPath: web + "/gallery/modules", withIntermediateDirectories: true)
        try tree.write("web/gallery/index.html", "<!doctype html>")
        try tree.write("web/gallery/main.js", "export {}")
        try tree.write("web/gallery/modules/grid.js", "export {}")
        try tree.write("web/gallery/notes.txt", "not served")
        try tree.write("web/secret.js", "outside the gallery")
        try FileManager.default.createSymbolicLink(atPath: web + "/gallery/leak.js", withDestinationPath: web + "/secret.js")
        // 10,000 bytes 0, 1, 2, … 255, 0, …: a range's bytes say where they came from.
        try Data((0..<10_000).map { UInt8($0 & 255) }).write(to: URL(fileURLWithPath: tree.root + "/clip.mp4"))
        try Data((0..<100).map { UInt8($0) }).write(to: URL(fileURLWithPath: tree.outside + "/clip.mp4"))
    }

    var gallery: GalleryFront { GalleryFront(GalleryConfiguration(roots: ["photos": tree.root], webDirectory: web)) }
    var media: MediaFront { MediaFront(roots: ["photos": tree.root]) }

    func media(_ target: String, _ headers: HTTPHeaders = [:], method: String = "GET") -> HTTPResponse {
        media.handle(get(target, headers, method: method))
    }

    // MARK: Priority

    @Test("Priority: u=N maps to the daemon's priorities; none, or one not understood, is visible")
    func priority() {
        func of(_ fields: [String]) -> Priority {
            var headers = HTTPHeaders()
            for field in fields { headers.append("Priority", field) }
            return RequestPriority.of(headers)
        }
        #expect(of([]) == .visible)
        #expect(of(["u=0"]) == .visible && of(["u=1, i"]) == .visible)
        #expect(of(["u=2"]) == .high && of(["u=3"]) == .normal)
        #expect(of(["i, u=4"]) == .prefetch && of(["u=5"]) == .prefetch)
        #expect(of(["u=6"]) == .background && of(["u=7"]) == .background)
        #expect(of(["u=8"]) == .visible && of(["u=x"]) == .visible && of(["u=-1"]) == .visible && of(["u=33"]) == .visible)
        #expect(of(["u=4", "u=2"]) == .high)
    }

    // MARK: Media

    @Test("the whole file: 200, Accept-Ranges, a strong ETag, its type; HEAD the same")
    func whole() throws {
        let response = media("/media/photos/clip.mp4")
        #expect(response.status == 200 && response.body.count == 10_000)
        #expect(response.headers["Accept-Ranges"] == "bytes" && response.headers["Content-Type"] == "video/mp4")
        let tag = try #require(response.headers["ETag"])
        #expect(tag.hasPrefix("\"") && response.headers["Last-Modified"] != nil)
        #expect(media("/media/photos/clip.mp4", method: "HEAD").headers["ETag"] == tag)
        #expect(media("/media/photos/clip.mp4", ["If-None-Match": tag]).status == 304)
        #expect(media("/media/photos/clip.mp4", method: "POST").status == 405)
    }

    @Test("Range: 206 with Content-Range and exactly those bytes; a suffix; past the end 416")
    func ranges() {
        let part = media("/media/photos/clip.mp4", ["Range": "bytes=300-303"])
        #expect(part.status == 206 && part.headers["Content-Range"] == "bytes 300-303/10000")
        #expect(part.body == [44, 45, 46, 47])
        let open = media("/media/photos/clip.mp4", ["Range": "bytes=9998-"])
        #expect(open.status == 206 && open.body == [14, 15] && open.headers["Content-Range"] == "bytes 9998-9999/10000")
        let suffix = media("/media/photos/clip.mp4", ["Range": "bytes=-3"])
        #expect(suffix.status == 206 && suffix.headers["Content-Range"] == "bytes 9997-9999/10000")
        let beyond = media("/media/photos/clip.mp4", ["Range": "bytes=10000-"])
        #expect(beyond.status == 416 && beyond.headers["Content-Range"] == "bytes */10000")
        // Not a Range we honour: the whole file.
        #expect(media("/media/photos/clip.mp4", ["Range": "lines=1-2"]).status == 200)
        #expect(media("/media/photos/clip.mp4", ["Range": "bytes=5-2"]).status == 200)
        // An If-Range of another version: the whole (current) file.
        #expect(media("/media/photos/clip.mp4", ["Range": "bytes=0-1", "If-Range": "\"old\""]).status == 200)
        let tag = media("/media/photos/clip.mp4").headers["ETag"]!
        #expect(media("/media/photos/clip.mp4", ["Range": "bytes=0-1", "If-Range": tag]).status == 206)
    }

    @Test("ranges: an open range is cut to the chunk, several are their span")
    func rangeRules() {
        #expect(ByteRange.answer("bytes=0-", size: 100 << 20, chunk: 4 << 20) == .part(0, (4 << 20) - 1))
        #expect(ByteRange.answer("bytes=0-1,10-19", size: 100, chunk: 50) == .part(0, 19))
        #expect(ByteRange.answer("bytes=-0", size: 100, chunk: 50) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=0-0", size: 0, chunk: 50) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=99999999999999999999-", size: 100, chunk: 50) == .unsatisfiable)
        #expect(ByteRange.answer("bytes=a-", size: 100, chunk: 50) == .whole)
        #expect(ByteRange.answer("bytes=90-200", size: 100, chunk: 50) == .part(90, 99))
    }

    @Test("media outside the root, missing, a directory: one 404, the same bytes", arguments: [
        "/media/photos/out-link.jpg", "/media/photos/dangling.jpg", "/media/photos/out-dir/secret.jpg",
        "/media/photos/out-dir/clip.mp4", "/media/photos/out-dir/missing.mp4", "/media/photos/missing.mp4",
        "/media/photos/2024", "/media/nosuchroot/clip.mp4", "/media/photos",
    ])
    func mediaNotFound(_ target: String) {
        let response = media(target, ["Range": "bytes=0-"])
        let reference = media("/media/photos/missing.mp4")
        #expect(response.status == 404 && response.body == reference.body)
    }

    @Test("media paths with .., an encoded / or a NUL are 400 before any look", arguments: [
        "/media/photos/../outside/clip.mp4", "/media/photos/2024/%2E%2E/clip.mp4", "/media/photos/out-dir%2Fclip.mp4",
        "/media/photos/clip.mp4%00", "/media/photos//clip.mp4", "/media/photos/%zz",
    ])
    func mediaBadRequest(_ target: String) {
        #expect(media(target).status == 400)
    }

    // MARK: Gallery

    @Test("the page: /gallery/ and a folder's album are index.html, with a CSP; others 404 or 400")
    func page() throws {
        let home = try #require(gallery.handle(get("/gallery/")).response)
        #expect(home.status == 200 && home.text == "<!doctype html>")
        #expect(home.headers["Content-Type"] == "text/html; charset=utf-8")
        #expect(home.headers["Content-Security-Policy"]?.contains("default-src 'self'") == true)
        #expect(gallery.handle(get("/gallery/photos/2024")).response?.status == 200)
        #expect(gallery.handle(get("/gallery/photos/2024/")).response?.status == 200)
        #expect(gallery.handle(get("/gallery")).response?.status == 301)
        let missing = try #require(gallery.handle(get("/gallery/photos/nothing")).response)
        let outside = try #require(gallery.handle(get("/gallery/photos/out-dir")).response)
        #expect(missing.status == 404 && outside.status == 404 && missing.body == outside.body)
        #expect(gallery.handle(get("/gallery/photos/2024/a.jpg")).response?.status == 404)
        #expect(gallery.handle(get("/gallery/photos/%2E%2E")).response?.status == 400)
    }

    @Test("assets: the page's files by suffix with an ETag; no listing, nothing outside gallery/")
    func assets() throws {
        let script = try #require(gallery.handle(get("/gallery/assets/main.js")).response)
        #expect(script.status == 200 && script.headers["Content-Type"] == "text/javascript; charset=utf-8")
        let tag = try #require(script.headers["ETag"])
        #expect(gallery.handle(get("/gallery/assets/main.js", ["If-None-Match": tag])).response?.status == 304)
        #expect(gallery.handle(get("/gallery/assets/modules/grid.js")).response?.status == 200)
        for target in ["/gallery/assets/", "/gallery/assets/modules", "/gallery/assets/notes.txt", "/gallery/assets/leak.js",
                       "/gallery/assets/missing.js"] {
            #expect(gallery.handle(get(target)).response?.status == 404, "\(target)")
        }
        #expect(gallery.handle(get("/gallery/assets/../secret.js")).response?.status == 400)
        #expect(gallery.handle(get("/gallery/assets/modules%2Fgrid.js")).response?.status == 400)
    }

    @Test("the roots as JSON")
    func roots() throws {
        let response = try #require(gallery.handle(get("/gallery/api/roots")).response)
        #expect(response.status == 200 && response.text == "{\"roots\":[\"photos\"]}\n")
    }

    @Test("a layout window: the folder's real path, the window, the subfolders; bad windows 400")
    func layoutNeed() throws {
        guard case .layout(let need) = gallery.handle(get("/gallery/api/layout/photos/2024?offset=0&limit=50&order=modified")) else {
            Issue.record("not a layout")
            return
        }
        #expect(need.request == LayoutRequest(folder: try unwrap(IIIFResolver.realPath(tree.root + "/2024")),
                                              order: .modifiedNewestFirst, offset: 0, limit: 50))
        #expect(need.subfolders == ["sub"])
        guard case .layout(let rootNeed) = gallery.handle(get("/gallery/api/layout/photos")) else {
            Issue.record("the root is a folder too")
            return
        }
        #expect(rootNeed.subfolders == ["2024"] && rootNeed.window.limit == GalleryFront.defaultLimit)
        for query in ["limit=0", "limit=10001", "offset=-1", "order=size", "offset=x"] {
            #expect(gallery.handle(get("/gallery/api/layout/photos/2024?\(query)")).response?.status == 400, "\(query)")
        }
        let missing = gallery.handle(get("/gallery/api/layout/photos/none")).response
        let outside = gallery.handle(get("/gallery/api/layout/photos/out-dir")).response
        #expect(missing?.status == 404 && missing?.body == outside?.body)
    }

    @Test("the layout's JSON: an item per index (the last wins), its placeholder base64, IIIF id, media URL")
    func layoutJSON() throws {
        guard case .layout(let need) = gallery.handle(get("/gallery/api/layout/photos/2024?offset=0")) else {
            Issue.record("not a layout")
            return
        }
        let folder = need.request
        guard case .folder(let path, _) = folder.source else { return }
        var photo = MediaInfo(kind: .photo, width: 400, height: 300, durationMillis: 0, frames: 1, pages: 1, format: "jpeg", hasAlpha: false)
        let video = MediaInfo(kind: .video, width: 1920, height: 1080, durationMillis: 4000, frames: 0, pages: 1, format: "mp4/h264", hasAlpha: false)
        let pending = LayoutItem(index: 0, path: path + "/a b.jpg", outcome: .pending)
        photo.placeholder = [1, 2, 3, 4]
        let items = LayoutItems(total: 3, items: [
            pending, LayoutItem(index: 1, path: path + "/c.mp4", outcome: .info(video)),
            LayoutItem(index: 2, path: path + "/d.txt", outcome: .failed(ErrorReply(.unsupportedFormat, "text"))),
            LayoutItem(index: 0, path: path + "/a b.jpg", outcome: .info(photo)),
        ])
        let response = need.answer(.success(items))
        #expect(response.status == 200 && response.headers["Content-Type"] == "application/json")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any])
        #expect(object["total"] as? Int == 3 && object["path"] as? String == "2024" && object["folders"] as? [String] == ["sub"])
        let list = try #require(object["items"] as? [[String: Any]])
        #expect(list.count == 3)
        #expect(list[0]["name"] as? String == "a b.jpg" && list[0]["kind"] as? String == "photo")
        #expect(list[0]["width"] as? Int == 400 && list[0]["placeholder"] as? String == "AQIDBA==")
        #expect(list[0]["id"] as? String == "photos%2F2024%2Fa%20b.jpg" && list[0]["media"] == nil)
        #expect(list[1]["duration"] as? Int == 4000 && list[1]["media"] as? String == "/media/photos/2024/c.mp4")
        #expect(list[2]["kind"] as? String == "error" && (list[2]["error"] as? String)?.contains("text") == true)
        #expect(need.answer(.failure(.daemon(.notFound, "gone"))).status == 404)
        #expect(need.answer(.failure(.unavailable("no daemon"))).status == 503)
    }

    @Test("base64 as RFC 4648's vectors")
    func base64() {
        let vectors = ["": "", "f": "Zg==", "fo": "Zm8=", "foo": "Zm9v", "foob": "Zm9vYg==", "fooba": "Zm9vYmE=", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors { #expect(Base64.encode(Array(plain.utf8)) == encoded) }
    }
}
