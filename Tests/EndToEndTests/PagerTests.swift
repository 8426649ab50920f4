import Foundation
import Testing
import ViewerClient
import ViewerProtocol

/// A pager that never shows a blank page (issue 32): its screen-sized `opportunistic` RENDER
/// gets as its PREVIEW the grid's stored rendition as it is (no worker), else the EXIF
/// thumbnail at its own size; and the client's `Pager` renders the neighbours ahead and
/// cancels the pages swiped past. Real daemon, real sockets.
@Suite("Pager")
struct PagerTests {
    static let screen = RenditionSpec(width: 2560, height: 1440)

    /// A daemon with one render worker and a file that hangs it until `--job-timeout`, far
    /// enough away that the hang holds the worker whatever the machine's load.
    static func oneWorker() throws -> (DaemonProcess, hang: String) {
        let daemon = try DaemonProcess(executable: DaemonProcess.testing, extraArguments: ["--workers", "1", "--job-timeout", "60"])
        return (daemon, try Fixtures.write(daemon.directory + "/viewerd-test-hang.jpg", width: 300, height: 200))
    }

    /// Sends the page's RENDER of `photo` as `id` and reads its first answer, which must be its
    /// PREVIEW (nil, with the issue recorded, otherwise).
    static func pagePreview(of photo: String, id: UInt32, on connection: RawSocket) throws -> RenderResult? {
        try connection.send(.render(RenderRequest(path: photo, spec: screen, priority: .visible, delivery: .opportunistic)), id: id)
        let first = try #require(try connection.read(timeout: .seconds(30)))
        guard first.id == id, case .preview(let preview) = first.message else {
            Issue.record("expected the PREVIEW of \(id) first, got \(first.message.type) of \(first.id)")
            return nil
        }
        return preview
    }

    /// Holds the one render worker busy (`oneWorker`), so what is asked next waits in the queue
    /// and the preview lane's PREVIEW comes first for certain.
    static func holdTheWorker(_ daemon: DaemonProcess, _ hang: String, on connection: RawSocket, id: UInt32) throws {
        try connection.send(.render(RenderRequest(path: hang, spec: RenditionSpec(width: 64, height: 64))), id: id)
        try #require(eventually { (try? daemon.connect().stats()["jobs_running"]) == 1 })
    }

    /// Before, the stored rendition was a preview's source only when scaling it to the final's
    /// size cost at most 1/16 of the original's pixels: a 2560×1440 page of a 4000×3000 photo
    /// (1920×1440) never had one, and its first image waited for the final. A viewer that uploads
    /// raw RGBA to its textures asks both in `raw` (before, a raw request never had a stored
    /// rendition as its PREVIEW).
    @Test("a pager's PREVIEW after a grid's RENDER is the grid's stored rendition, its size and its bytes, before its RESULT",
          arguments: [OutputFormat.jpeg, .raw])
    func gridRenditionIsThePreview(format: OutputFormat) throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 4000, height: 3000)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256, format: format))), id: 1)
        guard case .result(let grid) = try connection.read().message else { Issue.record("expected the grid's RESULT"); return }
        try #require(eventually { try daemon.connect().stats()["store_entries"] == 2 })

        var page = Self.screen
        page.format = format
        try connection.send(.render(RenderRequest(path: photo, spec: page, priority: .visible, delivery: .opportunistic)), id: 2)
        let first = try connection.read(timeout: .seconds(30)), second = try connection.read(timeout: .seconds(30))
        guard case .preview(let preview)? = first?.message, case .result(let final)? = second?.message else {
            Issue.record("expected PREVIEW then RESULT, got \(String(describing: first?.message.type)) then \(String(describing: second?.message.type))")
            return
        }
        #expect((preview.width, preview.height) == (grid.width, grid.height))
        #expect((preview.width, preview.height, preview.format) == (256, 192, format))
        #expect(preview.bytes == grid.bytes, "the stored rendition's bytes, as they are")
        #expect((final.width, final.height, final.fromCache) == (1920, 1440, false))
        let stats = try daemon.connect().stats()
        #expect(stats["previews"] == 1)
        #expect(stats["previews_stored"] == 1, "sent from the store, with no worker")
    }

    /// A WebP grid thumbnail for a JPEG pager: the preview lane re-encodes it at its own size
    /// (the only render worker is held busy, so the lane's PREVIEW comes first for certain).
    @Test("a stored rendition in another format is re-encoded by the preview lane at its own size")
    func otherFormatIsReencoded() throws {
        let (daemon, hang) = try Self.oneWorker()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 4000, height: 3000)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256, format: .webp))), id: 1)
        guard case .result = try connection.read().message else { Issue.record("expected the grid's RESULT"); return }
        try #require(eventually { try daemon.connect().stats()["store_entries"] == 2 })
        try Self.holdTheWorker(daemon, hang, on: connection, id: 2)

        guard let preview = try Self.pagePreview(of: photo, id: 3, on: connection) else { return }
        #expect((preview.width, preview.height, preview.format) == (256, 192, .jpeg))
        #expect(preview.bytes.starts(with: [0xFF, 0xD8]))
        let stats = try daemon.connect().stats()
        #expect(stats["previews"] == 1)
        #expect(stats["previews_stored"] == 0)
    }

    /// Before, a raw page's preview base could be a stored raw rendition, which the preview lane
    /// does not load: it failed there, and a smaller stored JPEG was never tried. `allow_larger`
    /// keeps the stored raw one from being sent as it is (`storedPreview`), so the lane decides.
    @Test("a raw page asked with allow_larger previews from the stored JPEG, not from a stored raw one the lane cannot load")
    func rawBaseIsNotTheLanes() throws {
        let (daemon, hang) = try Self.oneWorker()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/photo.jpg", width: 4000, height: 3000)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 256, height: 256))), id: 1)
        guard case .result = try connection.read().message else { Issue.record("expected the JPEG's RESULT"); return }
        try connection.send(.render(RenderRequest(path: photo, spec: RenditionSpec(width: 300, height: 300, format: .raw))), id: 2)
        guard case .result = try connection.read().message else { Issue.record("expected the raw RESULT"); return }
        try #require(eventually { try daemon.connect().stats()["store_entries"] == 3 })
        try Self.holdTheWorker(daemon, hang, on: connection, id: 3)

        var page = Self.screen
        page.format = .raw
        try connection.send(.render(RenderRequest(path: photo, spec: page, priority: .visible, delivery: .opportunistic,
                                                  allowLarger: true)), id: 4)
        let first = try #require(try connection.read(timeout: .seconds(30)))
        guard first.id == 4, case .preview(let preview) = first.message else {
            Issue.record("expected the PREVIEW of 4 first, got \(first.message.type) of \(first.id)")
            return
        }
        #expect((preview.width, preview.height, preview.format) == (256, 192, .raw), "made from the stored JPEG")
    }

    /// Before, the EXIF thumbnail was scaled to the final's size, so only when that cost at most
    /// 1/16 of the photo's pixels: never for a screen-sized page of a camera photo.
    @Test("with no stored rendition, a pager's PREVIEW is the EXIF thumbnail at its own size")
    func exifThumbnailAtItsOwnSize() throws {
        let (daemon, hang) = try Self.oneWorker()
        defer { daemon.stop() }
        let photo = try Fixtures.cameraJPEG(daemon.directory + "/camera.jpg", width: 4000, height: 3000)
        let connection = try RawSocket.greeted(path: daemon.socketPath)
        try Self.holdTheWorker(daemon, hang, on: connection, id: 1)

        guard let preview = try Self.pagePreview(of: photo, id: 2, on: connection) else { return }
        #expect((preview.width, preview.height) == (160, 120), "the thumbnail's own size, not scaled up")
        try connection.send(.cancel, id: 1)  // the worker, killed after the cancel's grace, is free for the page
        var answers: [UInt32: Message] = [:]
        while answers.count < 2 {
            let (id, message) = try connection.read()
            #expect(message.type != .preview, "a second PREVIEW for \(id)")
            answers[id] = message
        }
        guard case .result(let final) = answers[2] else { Issue.record("expected RESULT for 2, got \(answers)"); return }
        #expect((final.width, final.height) == (1920, 1440))
        #expect(try daemon.connect().stats()["previews_stored"] == 0)
    }

    /// The only render worker is held busy, so every page waits in the queue: a fling from page
    /// 0 to page 5 must cancel 0, 1 and 2 (out of reach) and ask 3 to 7, page 5 most urgently.
    @Test("the Pager asks the current page and ±2 ahead, and cancels the pages swiped past")
    func pagerPrefetchesAndCancels() async throws {
        let (daemon, hang) = try Self.oneWorker()
        defer { daemon.stop() }
        let paths = try (0..<8).map { try Fixtures.write(daemon.directory + "/p\($0).jpg", width: 600, height: 400, seed: $0) }
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath, clientName: "e2e-pager")
        let hung = client.request(hang, spec: RenditionSpec(width: 64, height: 64))
        try #require(eventually { (try? daemon.connect().stats()["jobs_running"]) == 1 })

        let pager = Pager(client: client, paths: paths, spec: RenditionSpec(width: 1280, height: 720))
        pager.show(0)
        #expect(eventually { (try? daemon.connect().stats()["requests"]) == 4 }, "the hang, page 0 and pages 1 and 2 ahead")
        pager.show(5)
        #expect(eventually {
            guard let stats = try? daemon.connect().stats() else { return false }
            return stats["requests"] == 9 && (stats["cancelled_queued"] ?? 0) + (stats["cancelled_running"] ?? 0) == 3
        }, "pages 3 to 7 asked, 0 to 2 cancelled")
        hung.cancel()  // the worker, killed after the cancel's grace, is free for the pages
        _ = try? await hung.result

        var finals: [Int] = []
        for await page in pager.pages {
            guard case .success(let rendition) = page.result else { Issue.record("page \(page.index) failed: \(page.result)"); break }
            #expect((3...7).contains(page.index), "page \(page.index) was swiped past")
            if !rendition.isDegraded { finals.append(page.index) }
            if finals.count == 5 { break }
        }
        #expect(finals.first == 5, "the page on screen first: \(finals)")
        #expect(Set(finals) == Set(3...7))
        pager.close()
    }
}
