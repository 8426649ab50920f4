import Foundation
import Testing
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// LAYOUT through the real daemon: a whole window's media info in one request, stored info
/// at once, the rest read in the workers and sent as it comes, each file's failure its own.
@Suite("LAYOUT through the daemon", .serialized)
struct LayoutTests {
    /// Every batch of one LAYOUT, and each index's last item (a later one replaces an earlier).
    struct Outcome {
        var batches: [LayoutItems] = []
        var final: [UInt32: LayoutItem] = [:]
        var count: UInt64 = 0
        var pendingSeen = 0

        var sizes: [String] {
            final.keys.sorted().map { index in
                switch final[index]!.outcome {
                case .info(let info): "\(info.width)x\(info.height)"
                case .failed(let error): "error \(error.rawCode)"
                case .pending: "pending"
                }
            }
        }
    }

    static func layout(_ connection: ViewerConnection, _ request: LayoutRequest) throws -> Outcome {
        var outcome = Outcome()
        outcome.count = try connection.layout(request) { batch in
            outcome.batches.append(batch)
            for item in batch.items {
                if case .pending = item.outcome { outcome.pendingSeen += 1 }
                outcome.final[item.index] = item
            }
        }
        return outcome
    }

    /// `count` PNGs named `name-000.png`…, of (40 + i) × 30, their mtimes one second apart
    /// (the first the oldest).
    static func folder(_ directory: String, count: Int, name: String = "img") throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try (0..<count).map { i in
            let path = directory + "/" + name + "-" + String(format: "%03d", i) + ".png"
            try Fixtures.write(path, width: 40 + i, height: 30, seed: i)
            var times = [timespec(tv_sec: 1_700_000_000 + i, tv_nsec: 0), timespec(tv_sec: 1_700_000_000 + i, tv_nsec: 0)]
            utimensat(AT_FDCWD, path, &times, 0)
            return path
        }
    }

    @Test("a folder by name: every file's kind and upright size in order, a video among photos, a corrupt file and a subfolder")
    func folderByName() throws {
        // Given a folder of five PNGs, a video, a corrupt JPEG, a text file, a hidden file and a subfolder
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let dir = daemon.directory + "/roll"
        let photos = try Self.folder(dir, count: 5)
        var expected = photos.enumerated().map { i, _ in "\(40 + i)x30" }
        var kinds: [MediaInfo.Kind] = Array(repeating: .photo, count: 5)
        try Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 16] + Array(repeating: 0x41, count: 200)).write(to: URL(fileURLWithPath: dir + "/m-broken.jpg"))
        expected.append("error 301")  // corrupt-image, sorted after the PNGs ("img-" < "m-")
        kinds.append(.photo)
        try Data("not an image".utf8).write(to: URL(fileURLWithPath: dir + "/n-notes.txt"))
        expected.append("error 300")  // unsupported-format
        kinds.append(.photo)
        if FileManager.default.isExecutableFile(atPath: VideoClips.ffmpeg), let clip = try VideoClips.shared().first(where: { $0.container == "mp4" }) {
            try FileManager.default.copyItem(atPath: clip.path, toPath: dir + "/v-clip.mp4")
            let probe = try VideoClips.probe(clip.path)
            let turned = probe.rotation == 90 || probe.rotation == 270
            expected.append(turned ? "\(probe.height)x\(probe.width)" : "\(probe.width)x\(probe.height)")
            kinds.append(.video)
        }
        try Data("hidden".utf8).write(to: URL(fileURLWithPath: dir + "/.hidden.png"))
        try FileManager.default.createDirectory(atPath: dir + "/sub", withIntermediateDirectories: true)
        let connection = try daemon.connect()

        // When the folder is laid out by name
        let outcome = try Self.layout(connection, LayoutRequest(folder: dir, order: .name))

        // Then every file comes, in name order, with its size or its own error, and the stream ends with an ACK
        #expect(outcome.count == UInt64(expected.count))
        #expect(outcome.batches.allSatisfy { $0.total == UInt32(expected.count) })
        #expect(outcome.sizes == expected)
        #expect(outcome.final.values.allSatisfy { $0.isFinal })
        for (index, kind) in kinds.enumerated() where outcome.final[UInt32(index)]?.info != nil {
            #expect(outcome.final[UInt32(index)]?.info?.kind == kind, "item \(index)")
        }
        #expect(outcome.final[0]?.path == dir + "/img-000.png")
        #expect(outcome.pendingSeen == expected.count, "a cold folder's items come pending first")
    }

    @Test("a folder newest first, a window of it; then again, every item stored: no pending item, no read")
    func newestFirstAndStored() throws {
        // Given ten PNGs whose mtimes rise with their names
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let dir = daemon.directory + "/ten"
        _ = try Self.folder(dir, count: 10)
        let connection = try daemon.connect()

        // When a window of four (from the third newest) is laid out newest first
        let window = try Self.layout(connection, LayoutRequest(folder: dir, order: .modifiedNewestFirst, offset: 2, limit: 4))

        // Then it is files 7, 6, 5, 4 at indexes 2-5, with the folder's total
        #expect(window.final.keys.sorted() == [2, 3, 4, 5])
        #expect(window.sizes == ["47x30", "46x30", "45x30", "44x30"])
        #expect(window.final[2]?.path == dir + "/img-007.png")
        #expect(window.batches.first?.total == 10)
        #expect(window.count == 4)

        // And when the same window is asked again, it is all stored: one batch, no reads
        let reads = try connection.stats()["info_reads"]
        let again = try Self.layout(connection, LayoutRequest(folder: dir, order: .modifiedNewestFirst, offset: 2, limit: 4))
        #expect(again.sizes == window.sizes)
        #expect(again.pendingSeen == 0)
        #expect(again.batches.count == 1)
        #expect(try connection.stats()["info_reads"] == reads)
    }

    @Test("a list of paths: items by their place in the list, a missing and a relative one failing alone, duplicates answered twice")
    func listOfPaths() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photos = try Self.folder(daemon.directory + "/list", count: 3)
        let connection = try daemon.connect()
        let paths = [photos[2], daemon.directory + "/missing.png", "relative.png", photos[0], photos[0]]

        let outcome = try Self.layout(connection, LayoutRequest(paths: paths))

        #expect(outcome.sizes == ["42x30", "error 200", "error 103", "40x30", "40x30"])
        #expect(outcome.final.values.allSatisfy { $0.path == nil })
        #expect(outcome.batches.first?.total == 5)
    }

    @Test("a same-size rewrite with its mtime put back is laid out anew, not from the stale stored info")
    func staleAfterRewrite() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let (wide, tall) = try InfoRewriteTests.landscapeAndPortrait(in: daemon.directory)
        let rewrite = try SameIdentityRewrite(daemon.directory + "/layout.png", first: wide)
        let connection = try daemon.connect()
        #expect(try Self.layout(connection, LayoutRequest(paths: [rewrite.path])).sizes == ["300x200"])
        #expect(try Self.layout(connection, LayoutRequest(paths: [rewrite.path])).pendingSeen == 0)

        #expect(try rewrite.rewrite(with: tall), "the rewrite changed the identity")

        #expect(try Self.layout(connection, LayoutRequest(paths: [rewrite.path])).sizes == ["200x300"], "stale info after a rewrite")
    }

    @Test("CANCEL mid-stream ends the LAYOUT with CANCELLED and nothing after it; the connection goes on")
    func cancelMidStream() throws {
        // Given a cold folder of 400 distinct files (copies: each its own identity, each to read)
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let dir = daemon.directory + "/cold"
        let first = try Self.folder(dir, count: 1)[0]
        let bytes = try Data(contentsOf: URL(fileURLWithPath: first))
        for i in 1..<400 { try bytes.write(to: URL(fileURLWithPath: dir + "/copy-\(i).png")) }
        let raw = try daemon.rawConnection()

        // When its LAYOUT's first batch has come, and it is cancelled
        try raw.send(.layout(LayoutRequest(folder: dir)), id: 5)
        let (id, firstBatch) = try raw.read()
        #expect(id == 5)
        guard case .layoutItems = firstBatch else { Issue.record("expected LAYOUT_ITEMS, got \(firstBatch.type)"); return }
        // Then CANCELLED ends it, nothing more comes for it, and the PING is answered
        #expect(try Self.cancel(5, pinging: 6, on: raw) == .cancelled)
        try raw.send(.ping, id: 7)
        let (late, answer) = try raw.read()
        #expect(late == 7 && answer == .pong, "a frame for the cancelled LAYOUT came late")
    }

    @Test("a folder LAYOUT cancelled while it is listed, its id reused at once: the old listing never starts under the new LAYOUT")
    func reusedIDAfterCancelWhileListing() throws {
        // Given a folder of 3,000 files (listing it takes a while) and 30 cold PNGs (reading them takes longer)
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let big = daemon.directory + "/big"
        try FileManager.default.createDirectory(atPath: big, withIntermediateDirectories: true)
        for i in 0..<3000 { FileManager.default.createFile(atPath: big + "/f-\(i).txt", contents: Data("x".utf8)) }
        let cold = try Self.folder(daemon.directory + "/cold", count: 30)
        let raw = try daemon.rawConnection()

        // When the folder's LAYOUT is cancelled and id 7 reused for a list, all in one write
        var frames = Message.layout(LayoutRequest(folder: big)).frame(requestID: 7).bytes
        frames += Message.cancel.frame(requestID: 7).bytes
        frames += Message.layout(LayoutRequest(paths: cold)).frame(requestID: 7).bytes
        try raw.write(frames)

        // Then id 7 answers CANCELLED, then only the list's items (no path: not a folder's) and its ACK
        var cancelled = false
        var indices = Set<UInt32>()
        while true {
            guard let (id, message) = try raw.read(timeout: .seconds(60)) else { Issue.record("no ACK within 60 s"); return }
            guard id == 7 else { continue }
            switch message {
            case .cancelled: cancelled = true
            case .layoutItems(let batch):
                #expect(batch.total == 30, "items of another request: total \(batch.total)")
                for item in batch.items {
                    #expect(item.path == nil, "a folder's item under the list's id: \(item.path ?? "")")
                    indices.insert(item.index)
                }
            case .ack(let count):
                #expect(cancelled)
                #expect(count == 30 && indices == Set(0..<30))
                return
            default: Issue.record("unexpected \(message)"); return
            }
        }
    }

    @Test("limits: over 10,000 paths, a fifth LAYOUT at once, both a list and a folder, a relative or missing folder")
    func limits() throws {
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let dir = daemon.directory + "/busy"
        let first = try Self.folder(dir, count: 1)[0]
        let bytes = try Data(contentsOf: URL(fileURLWithPath: first))
        for i in 1..<200 { try bytes.write(to: URL(fileURLWithPath: dir + "/copy-\(i).png")) }
        let raw = try daemon.rawConnection()

        // Too many paths: invalid-argument, before anything is opened
        try raw.send(.layout(LayoutRequest(paths: Array(repeating: first, count: 10_001))), id: 1)
        #expect(try Self.terminal(of: 1, on: raw) == .error(ErrorReply(.invalidArgument, "a LAYOUT names at most 10000 paths, not 10001")))

        // A fifth LAYOUT while four run: busy
        for id in UInt32(10)..<15 { try raw.send(.layout(LayoutRequest(folder: dir)), id: id) }
        let fifth = try Self.terminal(of: 14, on: raw)
        guard case .error(let busy) = fifth else { Issue.record("expected busy, got \(fifth)"); return }
        #expect(busy.code == .busy)
        // (in any order: the newest LAYOUT's placeholders are rendered first)
        var terminals: [UInt32: Message] = [:]
        while terminals.count < 4 {
            let (id, message) = try raw.read()
            if message.isTerminal { terminals[id] = message }
        }
        #expect(terminals == Dictionary(uniqueKeysWithValues: (UInt32(10)..<14).map { ($0, Message.ack(count: 200)) }))

        // Both forms, or neither: malformed-frame
        var both = Message.layout(LayoutRequest(folder: dir)).body()
        both += [1, 0, 0, 0, 0, 0]  // tag 1 paths, empty
        try raw.write(Frame(type: MessageType.layout.rawValue, requestID: 20, body: both).bytes)
        guard case .error(let malformed) = try Self.terminal(of: 20, on: raw) else { Issue.record("expected an ERROR"); return }
        #expect(malformed.code == .malformedFrame)

        // A relative folder, a missing one
        try raw.send(.layout(LayoutRequest(folder: "relative/dir")), id: 21)
        guard case .error(let relative) = try Self.terminal(of: 21, on: raw) else { Issue.record("expected an ERROR"); return }
        #expect(relative.code == .invalidArgument)
        try raw.send(.layout(LayoutRequest(folder: daemon.directory + "/nowhere")), id: 22)
        guard case .error(let missing) = try Self.terminal(of: 22, on: raw) else { Issue.record("expected an ERROR"); return }
        #expect(missing.code == .notFound)
    }

    /// Sends CANCEL for `id` and a PING, and reads until the PONG: the terminal answer `id`
    /// had meanwhile, nothing expected after it.
    static func cancel(_ id: UInt32, pinging ping: UInt32, on raw: RawSocket) throws -> Message? {
        try raw.send(.cancel, id: id)
        try raw.send(.ping, id: ping)
        var terminal: Message?
        while true {
            let (got, message) = try raw.read()
            if got == ping { #expect(message == .pong); return terminal }
            #expect(terminal == nil, "a frame for the LAYOUT after its terminal answer: \(message.type)")
            if message.isTerminal { terminal = message }
        }
    }

    /// Reads until the terminal answer of `id`, skipping everything else.
    static func terminal(of id: UInt32, on raw: RawSocket) throws -> Message {
        while true {
            let (got, message) = try raw.read()
            if got == id && message.isTerminal { return message }
        }
    }

    @Test("placeholders come with the items: a camera JPEG's from its EXIF thumbnail, a rendered PNG's from its render; each of the image's colour")
    func placeholders() throws {
        // Given a camera JPEG (EXIF thumbnail) never seen, and a PNG rendered once
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let dir = daemon.directory + "/colours"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let orange: PlaceholderInfoTests.Colour = (220, 120, 40), green: PlaceholderInfoTests.Colour = (60, 180, 90)
        _ = try PlaceholderInfoTests.cameraJPEG(dir + "/a-orange.jpg", orange)
        let png = try PlaceholderInfoTests.picture(dir + "/b-green.png", width: 600, height: 400, green)
        let connection = try daemon.connect()
        _ = try connection.render(RenderRequest(path: png, spec: RenditionSpec(width: 128, height: 128)))

        // When the folder is laid out
        let outcome = try Self.layout(connection, LayoutRequest(folder: dir))

        // Then each item's info carries a placeholder whose mean is the image's colour
        try PlaceholderInfoTests.expectColour(try #require(outcome.final[0]?.info), orange, "of the camera JPEG (read cold)")
        try PlaceholderInfoTests.expectColour(try #require(outcome.final[1]?.info), green, "of the rendered PNG (stored)")
        #expect(outcome.final[1]?.info?.placeholderImage != nil)
    }

    @Test("files without a placeholder come placeholder_pending, then again with one rendered in the background, each of its image's colour; then the ACK")
    func placeholdersRenderedInTheBackground() throws {
        // Given three PNGs (no embedded thumbnail) of three colours, the first's info stored already
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let dir = daemon.directory + "/pngs"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let colours: [PlaceholderInfoTests.Colour] = [(200, 40, 40), (40, 170, 60), (50, 70, 210)]
        let paths = try colours.enumerated().map { i, colour in
            try PlaceholderInfoTests.picture(dir + "/p-\(i).png", width: 600 - 100 * i, height: 400, colour)
        }
        let connection = try daemon.connect()
        #expect(try connection.info(path: paths[0]).placeholder == nil, "a PNG's INFO has no placeholder")

        // When the folder is laid out
        let outcome = try Self.layout(connection, LayoutRequest(folder: dir))

        // Then each index came placeholder_pending first, then with a placeholder of its colour, before the ACK
        let items = outcome.batches.flatMap(\.items)
        for index in UInt32(0)..<3 {
            let mine = items.filter { $0.index == index && $0.info != nil }
            #expect(mine.first?.placeholderPending == true, "item \(index) came pending first")
            #expect(mine.last?.placeholderPending == false, "item \(index) came final")
            try PlaceholderInfoTests.expectColour(try #require(mine.last?.info), colours[Int(index)], "of item \(index)")
        }
        #expect(outcome.count == 3)

        // And laid out again, every placeholder is stored: one batch, none pending, no render
        let renders = try connection.stats()["renders"]
        let again = try Self.layout(connection, LayoutRequest(folder: dir))
        #expect(again.batches.count == 1)
        #expect(again.batches.flatMap(\.items).allSatisfy { !$0.placeholderPending && $0.info?.placeholder != nil })
        #expect(try connection.stats()["renders"] == renders)
    }

    @Test("CANCEL while placeholders are pending stops their renders: CANCELLED, nothing after it, the queued renders cancelled")
    func cancelWhilePlaceholdersPending() throws {
        // Given 40 PNGs whose info is stored, without placeholders
        let daemon = try DaemonProcess(extraArguments: ["--workers", "1"])
        defer { daemon.stop() }
        let dir = daemon.directory + "/many"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let paths = try (0..<40).map { i in
            try PlaceholderInfoTests.picture(dir + "/q-\(String(format: "%02d", i)).png", width: 1200 + i, height: 900, (i * 6, 90, 200 - i * 4))
        }
        let connection = try daemon.connect()
        for path in paths { _ = try connection.info(path: path) }
        let raw = try daemon.rawConnection()

        // When it is laid out, and cancelled once the first placeholder has come
        try raw.send(.layout(LayoutRequest(folder: dir)), id: 5)
        var pending = 0
        while true {
            let (id, message) = try raw.read()
            #expect(id == 5)
            guard case .layoutItems(let batch) = message else { Issue.record("expected LAYOUT_ITEMS, got \(message.type)"); return }
            pending += batch.items.count { $0.placeholderPending }
            if batch.items.contains(where: { !$0.placeholderPending && $0.info?.placeholder != nil }) { break }
        }
        #expect(pending == 40, "every item came placeholder_pending")
        // Then CANCELLED ends it and nothing more comes for it
        #expect(try Self.cancel(5, pinging: 6, on: raw) == .cancelled)

        // And its queued renders were cancelled, not run: far fewer than 40 rendered
        let stats = try connection.stats()
        #expect((stats["cancelled_queued"] ?? 0) + (stats["cancelled_running"] ?? 0) >= 1, "\(stats)")
        try raw.send(.ping, id: 7)
        #expect(try raw.read().0 == 7, "a frame for the cancelled LAYOUT came late")
        #expect((try connection.stats()["renders"] ?? 0) < 40)
    }

    @Test("another user's peer lays out a folder under a shared root, and is refused one outside it",
          .enabled(if: OtherUserClient.unavailableReason == nil))
    func otherUser() throws {
        let scene = try SharedRootScene(writeImage: { path, width, height in try Fixtures.write(path, width: width, height: height) })
        defer { scene.daemon.stop() }
        let mine = try scene.ownImage("a.png", width: 64, height: 48)
        try Fixtures.write(scene.shared + "/b.png", width: 32, height: 16)
        symlink(scene.secretImage, scene.shared + "/c-leak.png")

        let inside = try scene.other.run(["layout", scene.daemon.socketPath, scene.shared])
        #expect(inside == ["0 \(scene.shared)/b.png 32x16", "1 \(scene.shared)/c-leak.png error 201"], "\(mine)")
        let outside = try scene.other.run(["layout", scene.daemon.socketPath, scene.secret])
        #expect(outside == ["error 201"])
        let incoming = try scene.other.run(["layout", scene.daemon.socketPath, scene.incoming])
        #expect(incoming == ["0 \(scene.incoming)/a.png 64x48"])
    }
}
