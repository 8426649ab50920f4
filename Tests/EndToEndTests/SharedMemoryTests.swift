import Foundation
import Testing
import SystemCalls
import ViewerClient
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Raw renditions in shared memory (issue 32, item 3; PROTOCOL.md, "Shared-memory
/// renditions"): a RENDER of `raw` with `shared_memory` gets its pixels as a sealed memfd
/// attached to the RESULT, which the client maps read-only; a RENDER without it, inline.
@Suite("Shared-memory renditions", .serialized)
struct SharedMemoryTests {
    /// Descriptors this process has open of the daemon's rendition memfds (named so by
    /// `SharedRenditions`: other tests running in this process at once open other files),
    /// and its mappings of them.
    private static func ownRenditionDescriptors() -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.count { fd in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd))?
                .hasPrefix("/memfd:viewerd-rendition") ?? false
        }
    }
    private static func renditionMappings() -> Int {
        // Read to the end: /proc files say they are empty, and a read by size stops short.
        let data = (try? FileHandle(forReadingAtPath: "/proc/self/maps")?.readToEnd()) ?? nil
        let maps = String(decoding: data ?? Data(), as: UTF8.self)
        return maps.split(separator: "\n").filter { $0.contains("memfd:viewerd-rendition") }.count
    }

    @Test("the RESULT carries a sealed memfd that cannot be written or mapped writable, holding the inline rendition's pixels")
    func sealedAndReadOnly() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/p.jpg", width: 800, height: 600)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        #expect(socket.welcome?.capabilities.contains(.sharedMemory) == true)
        let spec = RenditionSpec(width: 400, height: 300, format: .raw)

        // Given the inline rendition (a render), then the same asked in shared memory (a hit)
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 1)
        guard case .result(let inline) = try socket.readMessage() else { Issue.record("no inline RESULT"); return }
        #expect(inline.sharedByteCount == nil && inline.bytes.count == 400 * 300 * 4)
        try socket.send(.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)), id: 2)
        let frame = try socket.readFrame()
        let answer = try Message(frame: frame)

        // Then the frame is flagged and carries no bytes, and its descriptor holds them, sealed
        #expect(frame.flags & FrameFlags.descriptor != 0)
        #expect(frame.body.count < 100, "the pixels are not in the frame: \(frame.body.count) bytes")
        guard case .result(let shared) = answer, let fd = socket.takeDescriptor() else {
            Issue.record("no RESULT with a descriptor: \(answer)")
            return
        }
        defer { Posix.close(fd) }
        #expect(shared.sharedByteCount == UInt32(400 * 300 * 4) && shared.bytes.isEmpty && shared.fromCache)
        #expect(try Posix.seals(fd) & Posix.readOnlySeals == Posix.readOnlySeals)
        #expect(Glibc.write(fd, [UInt8](repeating: 0, count: 16), 16) == -1 && errno == EPERM, "a sealed memfd refuses writes")
        let writable = mmap(nil, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)
        #expect(writable == MAP_FAILED && errno == EPERM, "and a writable shared mapping")
        let mapping = try Posix.mapReadOnly(fd, count: Int(shared.sharedByteCount ?? 0))
        defer { Posix.unmap(mapping) }
        #expect(mapping.elementsEqual(inline.bytes), "the same pixels as inline")
    }

    @Test("ViewerClient maps it read-only, equal to the inline bytes, and frees descriptors and mappings; the daemon's descriptors stay flat")
    func clientMapsAndFrees() async throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/p.jpg", width: 900, height: 600, seed: 3)
        let client = try await ViewerClient.connect(socketPath: daemon.socketPath, clientName: "e2e-shared")
        let spec = RenditionSpec(width: 300, height: 200, format: .raw)
        let inline = try await client.render(photo, spec: spec)
        #expect(inline.shared == nil && inline.bytes.count == 300 * 200 * 4, "no flag: the bytes inline")
        let smaller = RenditionSpec(width: 150, height: 100, format: .raw)

        // A render (a miss) and a hit, both in shared memory, equal to the inline pixels
        try await Self.expectShared(client, photo, smaller, fromCache: false) { try await client.render(photo, spec: smaller).bytes }
        try await Self.expectShared(client, photo, spec, fromCache: true) { inline.bytes }
        // Not raw: the flag changes nothing
        let jpeg = try await client.render(photo, spec: RenditionSpec(width: 300, height: 200), sharedMemory: true)
        #expect(jpeg.shared == nil && jpeg.bytes.starts(with: [0xFF, 0xD8]))
        #expect(try eventually(.seconds(10)) { Self.renditionMappings() == 0 }, "mappings freed with their results")

        // Then N more leave no descriptor or mapping behind, here or in the daemon
        let ours = Self.ownRenditionDescriptors(), theirs = daemon.descriptorCount()
        let hits = try await client.stats()["store_hits"] ?? 0
        for _ in 0..<30 {
            #expect(try await Self.pageBytes(client, photo, spec) == 300 * 200 * 4)
        }
        #expect(try eventually(.seconds(10)) { Self.ownRenditionDescriptors() <= ours }, "descriptors closed once mapped")
        // (the I/O thread lets go of the last answer just after handing it over)
        #expect(try eventually(.seconds(10)) { Self.renditionMappings() == 0 }, "mappings freed with their results")
        #expect(try eventually(.seconds(10)) { daemon.descriptorCount() <= theirs }, "the daemon closes its copy once sent")
        #expect(try await client.stats()["store_hits"] == hits + 30, "served from the kept memfd, each still a hit")
    }

    @Test("hits of a large raw rendition asked one after another get the one kept memfd each time: answered inside the store read, which a second lookup cannot enter")
    func largeHitsReuseTheKeptMemfd() throws {
        // Given a 2000×1500 raw rendition (12 MB) stored, asked in shared memory as a pager
        // asks its page: each RENDER sent once the last answer is mapped (the bench's part 15)
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/page.jpg", width: 2000, height: 1500, seed: 5)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        defer { socket.shutdown() }
        let spec = RenditionSpec(width: 2000, height: 1500, format: .raw)
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 1)
        guard case .result = try socket.readMessage() else { throw POSIXError(.EBADMSG) }

        // When it is asked 12 times (each charged 12 MB until the daemon learns it was read:
        // three unread would pass the 32 MiB outbound limit)
        var inodes: Set<UInt64> = []
        for id in UInt32(2)...13 {
            try socket.send(.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)), id: id)
            guard case .result(let result) = try socket.readMessage(), result.fromCache, let fd = socket.takeDescriptor() else {
                throw POSIXError(.EBADMSG)
            }
            defer { Posix.close(fd) }
            let mapping = try Posix.mapReadOnly(fd, count: Int(result.sharedByteCount ?? 0))
            Posix.unmap(mapping)
            var status = stat()
            try #require(fstat(fd, &status) == 0)
            inodes.insert(UInt64(status.st_ino))
        }

        // Then every answer is the memfd made for the first: none held back and made again
        #expect(inodes.count == 1, "\(inodes.count) memfds made for 12 hits of one stored rendition")
    }

    /// The size of a shared-memory rendition, which is released on return.
    private static func pageBytes(_ client: ViewerClient, _ path: String, _ spec: RenditionSpec) async throws -> Int {
        try await client.render(path, spec: spec, sharedMemory: true).withUnsafeBytes { $0.count }
    }

    /// Renders `spec` in shared memory and expects a mapping whose bytes are `inline()`'s.
    private static func expectShared(_ client: ViewerClient, _ path: String, _ spec: RenditionSpec, fromCache: Bool,
                                     inline: () async throws -> [UInt8]) async throws {
        let shared = try await client.render(path, spec: spec, sharedMemory: true)
        #expect(shared.shared != nil && shared.bytes.isEmpty && shared.fromCache == fromCache)
        #expect(renditionMappings() >= 1)
        let pixels = try await inline()
        #expect(shared.withUnsafeBytes { $0.elementsEqual(pixels) }, "the same pixels as inline")
    }

    /// Asks `spec` of `path` in shared memory and returns the RESULT and a copy of its pixels.
    private static func sharedPixels(_ socket: RawSocket, _ path: String, _ spec: RenditionSpec, id: UInt32) throws
        -> (RenderResult, [UInt8]) {
        try socket.send(.render(RenderRequest(path: path, spec: spec, sharedMemory: true)), id: id)
        guard case .result(let result) = try socket.readMessage(), let fd = socket.takeDescriptor() else {
            throw POSIXError(.EBADMSG)
        }
        defer { Posix.close(fd) }
        let mapping = try Posix.mapReadOnly(fd, count: Int(result.sharedByteCount ?? 0))
        defer { Posix.unmap(mapping) }
        return (result, Array(mapping))
    }

    @Test("a kept memfd is not sent for a key whose stored pixels changed: a rewrite keeping the identity, rendered inline by another client")
    func keptMemfdFollowsTheStore() throws {
        // Given a dark photo asked in shared memory twice (a render, then the kept memfd)
        let daemon = try RenamedSourceTests.daemon()
        defer { daemon.stop() }
        let path = daemon.directory + "/photo.png"
        let (darkPNG, brightPNG) = (try CoarseTimestampTests.png(20, in: daemon.directory),
                                    try CoarseTimestampTests.png(230, in: daemon.directory))
        try #require(darkPNG.count == brightPNG.count, "the two PNGs must be the same size")
        try CoarseTimestampTests.rewrite(path, darkPNG)
        usleep(50_000)  // clear of the coarse-timestamp guard (a whole-10 ms ctime within 3 s)
        var before = stat()
        stat(path, &before)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        let other = try daemon.connect()
        let spec = RenamedSourceTests.spec
        #expect(CoarseTimestampTests.mean(try Self.sharedPixels(socket, path, spec, id: 1).1) < 100)
        #expect(try eventually { try other.stats()["store_entries"] == 2 })
        let (hit, dark) = try Self.sharedPixels(socket, path, spec, id: 2)
        #expect(hit.fromCache && CoarseTimestampTests.mean(dark) < 100)

        // When it is rewritten bright in place, same size, its modification time put back, and
        // another client renders it inline (stored under the same key)
        try CoarseTimestampTests.rewrite(path, brightPNG)
        var times = [before.st_atim, before.st_mtim]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let inline = try other.render(RenderRequest(path: path, spec: spec))
        #expect(!inline.fromCache && CoarseTimestampTests.mean(inline.bytes) > 200)
        #expect(try eventually { try other.render(RenderRequest(path: path, spec: spec)).fromCache })

        // Then a hit in shared memory has the new pixels, not the kept memfd's old ones
        let (again, bright) = try Self.sharedPixels(socket, path, spec, id: 3)
        #expect(again.fromCache)
        let same = bright == inline.bytes
        #expect(same, "the kept memfd's old pixels (mean \(CoarseTimestampTests.mean(bright)))")

        // And the same after an INVALIDATE and an inline render by the other client
        #expect(try other.invalidate(path) >= 1)
        try CoarseTimestampTests.rewrite(path, darkPNG)
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let darkAgain = try other.render(RenderRequest(path: path, spec: spec))
        #expect(!darkAgain.fromCache && CoarseTimestampTests.mean(darkAgain.bytes) < 100)
        #expect(try eventually { try other.render(RenderRequest(path: path, spec: spec)).fromCache })
        let (last, pixels) = try Self.sharedPixels(socket, path, spec, id: 4)
        let sameAgain = pixels == darkAgain.bytes
        #expect(last.fromCache && sameAgain, "the kept memfd's old pixels after INVALIDATE (mean \(CoarseTimestampTests.mean(pixels)))")
    }

    @Test("a client that never reads gets no more shared memory than the outbound limit in its socket; reading, it gets every RESULT")
    func unreadSharedMemoryIsBounded() throws {
        let daemon = try DaemonProcess(extraArguments: ["--client-write-timeout", "600"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/big.png", width: 1000, height: 1000)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        let spec = RenditionSpec(width: 1000, height: 1000, format: .raw)  // 4 MB each
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 1)
        _ = try socket.readMessage()  // stored: the rest are hits

        // When it asks for 40 (160 MB) in shared memory and reads nothing
        let count = 40
        var frames: [UInt8] = []
        for i in 0..<count {
            frames += Message.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)).frame(requestID: UInt32(i + 2)).bytes
        }
        try socket.write(frames)
        let frameSize = 16 + 44  // a RESULT with shared_bytes: no pixels
        #expect(try eventually(.seconds(30)) { try Posix.unreadReceived(socket.fd) >= 4 * frameSize })
        Thread.sleep(forTimeInterval: 1)  // what more the daemon would send unbounded

        // Then its socket holds about the 32 MiB limit's worth, not 40
        let queued = try Posix.unreadReceived(socket.fd) / frameSize
        #expect(queued < 12, "\(queued) shared-memory RESULTs queued unread")

        // And reading on, every request gets its RESULT, each with its descriptor
        var answered = Set<UInt32>()
        while answered.count < count, let frame = try socket.readFrame(timeout: .seconds(30)) {
            guard case .result(let result) = try Message(frame: frame) else { Issue.record("not a RESULT"); continue }
            #expect(result.sharedByteCount == 4_000_000)
            if let fd = socket.takeDescriptor() { Posix.close(fd) } else { Issue.record("no descriptor for \(frame.requestID)") }
            answered.insert(frame.requestID)
        }
        #expect(answered.count == count)
    }

    @Test("a client that never reads has at most 64 memfds queued or unread, however small; the rest of its answers come inline")
    func tinyUnreadMemfdsAreBounded() throws {
        let daemon = try DaemonProcess(extraArguments: ["--client-write-timeout", "600"])
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/p.png", width: 16, height: 16)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        let other = try daemon.connect()
        let spec = RenditionSpec(width: 1, height: 1, format: .raw)  // 4 bytes each
        try socket.send(.render(RenderRequest(path: photo, spec: spec)), id: 1)
        _ = try socket.readMessage()  // stored: the rest are hits
        let hits = try other.stats()["store_hits"] ?? 0

        // When it asks for 300 in shared memory and reads nothing until all are answered
        let count = 300
        var frames: [UInt8] = []
        for i in 0..<count {
            frames += Message.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)).frame(requestID: UInt32(i + 2)).bytes
        }
        try socket.write(frames)
        #expect(try eventually(.seconds(30)) { try other.stats()["store_hits"] == hits + UInt64(count) })

        // Then at most 64 came with a memfd, and every one has its RESULT
        var (answered, shared) = (Set<UInt32>(), 0)
        while answered.count < count, let frame = try socket.readFrame(timeout: .seconds(30)) {
            guard case .result(let result) = try Message(frame: frame) else { Issue.record("not a RESULT"); continue }
            if frame.flags & FrameFlags.descriptor != 0 {
                shared += 1
                if let fd = socket.takeDescriptor() { Posix.close(fd) } else { Issue.record("no descriptor for \(frame.requestID)") }
            } else {
                #expect(result.bytes.count == 4)
            }
            answered.insert(frame.requestID)
        }
        #expect(answered.count == count)
        #expect(shared <= 64, "\(shared) memfds sent to a client that read nothing")
    }

    @Test("a raw PREVIEW comes in shared memory too, before its RESULT, each with its own sealed memfd")
    func previewInSharedMemory() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.cameraJPEG(daemon.directory + "/camera.jpg", width: 3200, height: 2400)
        let socket = try RawSocket.greeted(path: daemon.socketPath)
        socket.receivesDescriptors = true
        let spec = RenditionSpec(width: 256, height: 256, format: .raw)
        try socket.send(.render(RenderRequest(path: photo, spec: spec, delivery: .opportunistic, sharedMemory: true)), id: 1)
        var kinds: [MessageType] = []
        while kinds.last != .result {
            let frame = try socket.readFrame()
            let message = try Message(frame: frame)
            guard case .result(let answer) = message.withoutPreview ?? message, frame.flags & FrameFlags.descriptor != 0,
                  let fd = socket.takeDescriptor() else {
                Issue.record("not a rendition in shared memory: \(message.type)")
                return
            }
            defer { Posix.close(fd) }
            #expect(answer.sharedByteCount == answer.width * answer.height * 4)
            #expect(try Posix.seals(fd) & Posix.readOnlySeals == Posix.readOnlySeals)
            kinds.append(message.type)
        }
        #expect(kinds == [.preview, .result])
    }

    @Test("a client that reads without taking descriptors loses them to the kernel, not to a leak: the daemon's count stays flat")
    func descriptorsNotTaken() throws {
        let daemon = try DaemonProcess()
        defer { daemon.stop() }
        let photo = try Fixtures.write(daemon.directory + "/p.jpg", width: 400, height: 300)
        let socket = try RawSocket.greeted(path: daemon.socketPath)  // plain recv: descriptors dropped
        let spec = RenditionSpec(width: 200, height: 150, format: .raw)
        try socket.send(.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)), id: 1)
        _ = try socket.readMessage()
        for i in 0..<5 {  // whatever the daemon opens once is open
            try socket.send(.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)), id: UInt32(100 + i))
            _ = try socket.readMessage()
        }
        let before = daemon.descriptorCount()
        for i in 0..<20 {
            try socket.send(.render(RenderRequest(path: photo, spec: spec, sharedMemory: true)), id: UInt32(i + 2))
            guard case .result(let result) = try socket.readMessage() else { Issue.record("not a RESULT"); continue }
            #expect(result.sharedByteCount == UInt32(200 * 150 * 4))
        }
        // (the last request's source is closed off the loop, a moment after its answer)
        #expect(try eventually(.seconds(10)) { daemon.descriptorCount() <= before }, "\(daemon.descriptorCount()) > \(before)")
        #expect(Self.ownRenditionDescriptors() == 0, "none reached this process: a plain recv drops them")
    }
}

private extension Message {
    /// A PREVIEW's rendition as a RESULT, so both are read alike; nil for anything else.
    var withoutPreview: Message? {
        if case .preview(let preview) = self { return .result(preview) }
        return nil
    }
}
