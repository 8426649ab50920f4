import Foundation
import SystemCalls
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// Hostile clients: garbage, mutated frames (every answerable frame answered exactly once),
/// truncated and oversized frames, duplicate ids, descriptor abuse, thousands of connections
/// opened and dropped, idle half-frames, and a client that never reads; a bystander is served
/// throughout, and the daemon's memory and descriptors stay bounded.
struct HostileClients {
    let context: Context
    let daemon: DaemonProcess

    init(_ context: Context, daemon: DaemonProcess) {
        self.context = context
        self.daemon = daemon
    }

    var report: Report { context.report }
    var path: String { daemon.socketPath }
    var renderBound: Duration { .seconds(2 * context.scale.jobTimeout + 10) }

    func run() {
        report.begin("hostile clients")
        defer { report.end() }
        context.ensureAlive(daemon, after: "before the hostile clients")
        let watch = MemoryWatch(daemon, report: report)
        let descriptorsBefore = daemon.descriptorCount()
        let bystander = Bystander(context, socketPath: path, bound: .seconds(2 * context.scale.jobTimeout + 5))
        let idle = idleConnections()
        step("garbage", garbage)
        step("random frames", randomFrames)
        step("mutated frames", mutatedFrames)
        step("truncated frames", truncatedFrames)
        step("oversized lengths", oversized)
        step("duplicate request ids", duplicateIDs)
        step("descriptor abuse", descriptors)
        step("connection churn", churn)
        step("a client that never reads", neverReads)
        step("a slow reader with renders finishing", { try SlowReader(context: context).run() })
        step("a slow reader whose renders are not stored", { try HeldBackReader(context: context).run() })
        for wire in idle { wire.close() }
        let (served, _) = bystander.stop()
        report.info("bystander served \(served) requests meanwhile")
        context.ensureAlive(daemon, after: "hostile clients")
        checkSettled(daemon, report: report, descriptorsBefore: descriptorsBefore)
        checkMemory(watch.stop(), report: report, limitMiB: context.settings.rssLimitMiB)
    }

    private func step(_ name: String, _ body: () throws -> Void) {
        if let only = context.settings.only, !name.contains(only) { return }
        let started = ContinuousClock.now
        do { try body() } catch { report.violation("\(name): \(error)") }
        context.ensureAlive(daemon, after: name)
        report.info("\(name): done in \(String(format: "%.1f", (ContinuousClock.now - started).seconds)) s")
    }

    private func random(_ range: Range<Int>) -> Int { context.randomInt(range) }
    private func randomBytes(_ count: Int) -> [UInt8] {
        var rng = SeededGenerator(seed: context.randomSeed())
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
    }

    /// Connections that sent HELLO and half a frame, then say nothing until the phase ends.
    private func idleConnections() -> [RawSocket] {
        var wires: [RawSocket] = []
        for i in 0..<context.scale.idleConnections {
            guard let wire = try? RawSocket.greeted(path: path, name: "idle") else { continue }
            let frame = Message.render(RenderRequest(path: context.goodImages[0].path, spec: RenditionSpec(width: 64, height: 64)))
                .frame(requestID: 1).bytes
            try? wire.write(Array(frame.prefix(1 + i % (frame.count - 1))))
            wires.append(wire)
        }
        report.cases(wires.count)
        return wires
    }

    /// Random bytes, before and after a handshake: the daemon answers malformed-frame (or
    /// handshake-required) with request id 0 and closes.
    private func garbage() throws {
        for i in 0..<context.scale.garbageConnections {
            report.cases()
            let wire = i % 2 == 0 ? try RawSocket(path: path) : try RawSocket.greeted(path: path, name: "garbage")
            var bytes = randomBytes(16 + random(0..<4096))
            if bytes.starts(with: FrameHeader.magic) { bytes[0] ^= 0xFF }
            try? wire.write(bytes)
            guard let frames = wire.readUntilClosed(timeout: .seconds(5)) else {
                report.violation("garbage: the daemon kept a connection open after \(bytes.count) bytes of garbage")
                wire.close()
                continue
            }
            for frame in frames {
                let message = try? Message(frame: frame)
                guard frame.requestID == 0, case .error(let e)? = message, [.malformedFrame, .handshakeRequired].contains(e.code) else {
                    report.violation("garbage: unexpected answer \(message?.outcome ?? "?") id \(frame.requestID)")
                    continue
                }
                report.answer(e.code!.name)
            }
            if frames.isEmpty { report.note("garbage: connection closed without an ERROR") }
            wire.close()
        }
    }

    /// Frames with valid headers and random types, flags and bodies. Anything may happen to
    /// the connection (a flagged frame without a descriptor ends it), but the daemon lives,
    /// and a connection that ends does so with an ERROR of request id 0.
    private func randomFrames() throws {
        for _ in 0..<max(4, context.scale.garbageConnections / 4) {
            let wire = try RawSocket.greeted(path: path, name: "random-frames")
            for i in 0..<20 {
                report.cases()
                let body = randomBytes(random(0..<200))
                let flags = UInt16(random(0..<4))
                var type = UInt8(random(0..<256))
                if type == MessageType.cancel.rawValue || type == MessageType.setPriority.rawValue { type = 0x7F }
                try? wire.write(rawHeader(type: type, flags: flags, id: UInt32(1000 + i), length: UInt32(body.count)) + body)
            }
            try? wire.send(.ping, id: 999_999)
            var closedWith: Message?
            var ponged = false
            let deadline = ContinuousClock.now + renderBound
            while !ponged && ContinuousClock.now < deadline {
                do {
                    guard let (id, message) = try wire.read(timeout: deadline - ContinuousClock.now) else { break }
                    report.answer(message.outcome)
                    if id == 0 { closedWith = message }
                    if id == 999_999, case .pong = message { ponged = true }
                } catch WireError.closed {
                    if closedWith == nil { report.violation("random frames: connection closed without an ERROR of id 0") }
                    break
                }
            }
            if !ponged && !wire.isClosed { report.violation("random frames: no PONG and no close within \(renderBound.seconds) s") }
            wire.close()
        }
    }

    /// One frame to mutate: its type, a valid body, and whether it is answered.
    private func baseFrame(_ i: Int) -> (type: UInt8, body: [UInt8], answered: Bool) {
        let good = context.goodImages[i % context.goodImages.count].path
        let spec = RenditionSpec(width: UInt32(32 + i % 200), height: UInt32(32 + i % 150), fit: i % 3 == 0 ? .fill : .fit,
                                 format: [.jpeg, .png, .webp][i % 3])
        let message: Message
        switch i % 16 {
        case 0, 1, 2: message = .render(RenderRequest(path: good, spec: spec, priority: .normal, delivery: i % 2 == 0 ? .final : .opportunistic))
        case 3: message = .render(RenderRequest(path: context.work + "/hostile/odd/fifo.jpg", spec: spec))
        case 4: message = .prefetch(PrefetchRequest(paths: [good, context.goodImages[(i + 1) % context.goodImages.count].path], spec: spec))
        case 5: message = .stopPrefetch(PrefetchRequest(paths: [good], spec: spec))
        case 6: message = .stopPrefetchAll
        case 7: message = .invalidate(InvalidateRequest(path: context.work + "/scratch/x\(i).jpg", recursive: i % 2 == 0))
        case 8: message = .stats
        case 9: message = .ping
        case 10: message = .hello(Hello(clientName: "again"))
        case 11: message = .result(RenderResult(format: .jpeg, width: 1, height: 1, fromCache: false, bytes: [0xFF, 0xD8]))
        case 12: message = .error(ErrorReply(.busy, "from a client"))
        case 13: message = .ack(count: 3)
        case 14: return (UInt8([0x00, 0x0E, 0x40, 0x7F, 0x80, 0x8B, 0xFF][i % 7]), randomBytes(random(0..<64)), true)
        case 15 where i % 32 == 15:
            // LAYOUT (issue 32): a hostile folder (FIFOs, links, unreadable files) or a list of
            // good, missing and odd paths, mutated like every other body.
            message = i % 64 == 15 ? .layout(LayoutRequest(folder: context.work + "/hostile", order: i % 3 == 0 ? .modifiedNewestFirst : .name))
                : .layout(LayoutRequest(paths: [good, context.work + "/hostile/odd/fifo.jpg", "/nowhere/x.jpg", "relative.jpg"]))
        default: message = .welcome(Welcome(version: 1, serverVersion: "x", maxRequestBody: 1, maxResponseBody: 1))
        }
        return (message.type.rawValue, message.body(), true)
    }

    private func mutate(_ body: [UInt8]) -> [UInt8] {
        var b = body
        switch random(0..<8) {
        case 0: return b  // intact
        case 1:  // flip bits
            for _ in 0..<(1 + random(0..<8)) where !b.isEmpty { b[random(0..<b.count)] ^= UInt8(1 << random(0..<8)) }
        case 2: b = Array(b.prefix(random(0..<(b.count + 1))))  // cut short
        case 3: b += randomBytes(1 + random(0..<20))  // junk after the fields
        case 4: if b.count >= 6 { b += Array(b.prefix(6 + Int(min(UInt32(le4(b, 2)), UInt32(b.count - 6))))) }  // first field twice
        case 5: if b.count >= 6 { b[2] = b[2] &+ UInt8(random(1..<4)) }  // first field's length wrong
        case 6: if !b.isEmpty { b[b.count - 1] = UInt8(random(0..<256)) }  // last value byte (often an enum)
        default: b = randomBytes(random(0..<(b.count + 8)))
        }
        return b
    }

    private func le4(_ b: [UInt8], _ i: Int) -> Int {
        Int(b[i]) | Int(b[i + 1]) << 8 | Int(b[i + 2]) << 16 | Int(b[i + 3]) << 24
    }

    /// Mutated bodies of every message type with valid headers: each frame except CANCEL and
    /// SET_PRIORITY gets exactly one terminal answer (PREVIEWs only before it), and the
    /// connection stays open.
    private func mutatedFrames() throws {
        let perConnection = 40
        var sent = 0
        var connection = 0
        while sent < context.scale.mutatedFrames {
            connection += 1
            let wire = try RawSocket.greeted(path: path, name: "mutated")
            var expected: Set<UInt32> = []
            var silent: Set<UInt32> = []
            var controlErrors: Set<UInt32> = []
            var bytes: [UInt8] = []
            for j in 0..<perConnection {
                let id = UInt32(j + 1)
                report.cases()
                sent += 1
                if j % 10 == 9 {
                    // CANCEL / SET_PRIORITY of ids never used: no answer when well-formed, one
                    // ERROR with that id when not (PROTOCOL.md, "Request ids").
                    let type = j % 20 == 9 ? MessageType.cancel.rawValue : MessageType.setPriority.rawValue
                    let body = mutate(Message.setPriority(.visible).body())
                    bytes += rawHeader(type: type, id: 10_000 + id, length: UInt32(body.count)) + body
                    silent.insert(10_000 + id)
                    continue
                }
                let base = baseFrame(sent + connection)
                let body = mutate(base.body)
                bytes += rawHeader(type: base.type, id: id, length: UInt32(body.count)) + body
                expected.insert(id)
            }
            try wire.write(bytes)
            var terminal: [UInt32: Int] = [:]
            let deadline = ContinuousClock.now + renderBound
            do {
                while ContinuousClock.now < deadline && !expected.isSubset(of: Set(terminal.keys)) {
                    guard let frame = try wire.readFrame(timeout: deadline - ContinuousClock.now) else { break }
                    let message = try? Message(frame: frame)
                    if frame.requestID == 0 {
                        report.violation("mutated frames: a connection-level answer \(message?.outcome ?? "?") to well-framed input")
                        continue
                    }
                    guard let message else { continue }
                    if silent.contains(frame.requestID) {
                        guard case .error = message, controlErrors.insert(frame.requestID).inserted else {
                            report.violation("mutated frames: an answer (\(message.outcome)) to a CANCEL/SET_PRIORITY id")
                            report.update { $0.spurious += 1 }
                            continue
                        }
                        continue
                    }
                    guard expected.contains(frame.requestID) else {
                        report.update { $0.spurious += 1 }
                        report.violation("mutated frames: an answer for request \(frame.requestID), never sent")
                        continue
                    }
                    if !message.isTerminal {  // a PREVIEW, a LAYOUT's items
                        if terminal[frame.requestID] != nil { report.violation("mutated frames: \(message.outcome) after the terminal answer") }
                        continue
                    }
                    report.answer(message.outcome)
                    terminal[frame.requestID, default: 0] += 1
                }
                // Nothing more may come for these ids: a PING's PONG closes the books.
                try wire.send(.ping, id: 99_999)
                while let (id, message) = try wire.read(timeout: .seconds(10)) {
                    if id == 99_999 { break }
                    if expected.contains(id) && message.isTerminal { terminal[id, default: 0] += 1 }
                }
            } catch {
                report.violation("mutated frames: the connection failed: \(error)")
            }
            for id in expected {
                let count = terminal[id] ?? 0
                if count == 0 { report.update { $0.lost += 1 }; report.violation("mutated frames: request \(id) never answered") }
                if count > 1 { report.update { $0.duplicated += count - 1 }; report.violation("mutated frames: request \(id) answered \(count) times") }
            }
            wire.close()
        }
    }

    /// Frames cut short, then the connection dropped: nothing to answer, nothing to keep.
    private func truncatedFrames() throws {
        let frame = Message.render(RenderRequest(path: context.goodImages[1].path, spec: RenditionSpec(width: 77, height: 77)))
            .frame(requestID: 3).bytes
        for i in 0..<max(20, context.scale.garbageConnections / 2) {
            report.cases()
            let wire = i % 3 == 0 ? try RawSocket(path: path) : try RawSocket.greeted(path: path, name: "truncated")
            let hello = Message.hello(Hello(clientName: "t")).frame(requestID: 0).bytes
            let bytes = i % 3 == 0 ? Array(hello.prefix(1 + i % (hello.count - 1))) : Array(frame.prefix(1 + i % (frame.count - 1)))
            try? wire.write(bytes)
            if i % 2 == 0 { wire.abort() } else { wire.close() }
        }
    }

    /// A header announcing more than max_request_body ends the connection with an ERROR,
    /// without waiting for the body; exactly the limit is fine.
    private func oversized() throws {
        let cases: [(greet: Bool, type: UInt8, length: UInt32)] = [
            (false, MessageType.hello.rawValue, 0xFFFF_FFFF), (true, MessageType.render.rawValue, (1 << 20) + 1),
            (true, MessageType.ping.rawValue, 0x7FFF_FFFF), (true, 0xEE, 0xFFFF_FFFF), (false, MessageType.ping.rawValue, (1 << 20) + 1),
        ]
        for c in cases {
            report.cases()
            let wire = c.greet ? try RawSocket.greeted(path: path, name: "oversized") : try RawSocket(path: path)
            try wire.write(rawHeader(type: c.type, id: 5, length: c.length))
            guard let frames = wire.readUntilClosed(timeout: .seconds(5)) else {
                report.violation("oversized: a header announcing \(c.length) bytes did not end the connection")
                continue
            }
            let messages = frames.compactMap { try? Message(frame: $0) }
            guard frames.count == 1, frames[0].requestID == 0, case .error(let e)? = messages.first, e.code == .malformedFrame else {
                report.violation("oversized: \(c.length) bytes answered \(messages.map(\.outcome)) before closing")
                continue
            }
            report.answer(e.code!.name)
        }
        // Exactly max_request_body: a PING carrying one unknown field of 1 MiB - 6 bytes.
        report.cases()
        let wire = try RawSocket.greeted(path: path, name: "at-the-limit")
        var body: [UInt8] = [99, 0]
        withUnsafeBytes(of: UInt32((1 << 20) - 6).littleEndian) { body.append(contentsOf: $0) }
        body += [UInt8](repeating: 0x41, count: (1 << 20) - 6)
        try wire.write(rawHeader(type: MessageType.ping.rawValue, id: 6, length: UInt32(body.count)) + body)
        guard let (id, message) = try wire.read(timeout: .seconds(10)), id == 6, case .pong = message else {
            report.violation("a frame of exactly max_request_body (a PING) was not answered PONG")
            return
        }
        report.answer("pong")
        wire.close()
    }

    /// Two RENDERs with one id while the first waits: ERROR invalid-argument for the second,
    /// the first carries on. Two with one id answered at once (hits) both get their RESULT.
    private func duplicateIDs() throws {
        let wire = try RawSocket.greeted(path: path, name: "duplicates")
        for round in 0..<4 {
            report.cases()
            let slow = context.slowImages[(round + 5) % context.slowImages.count]
            let spec = RenditionSpec(width: UInt32(300 + round * 7), height: 300)
            let id = UInt32(100 + round)
            try wire.send(.render(RenderRequest(path: slow, spec: spec)), id: id)
            try wire.send(.render(RenderRequest(path: slow, spec: spec)), id: id)
            var answers: [String] = []
            let deadline = ContinuousClock.now + renderBound
            while answers.count < 2, ContinuousClock.now < deadline {
                guard let (rid, message) = try wire.read(timeout: deadline - ContinuousClock.now) else { break }
                guard rid == id, message.isTerminal else { continue }
                answers.append(message.outcome)
                report.answer(message.outcome)
            }
            if answers.sorted() != ["invalid-argument", "result"] {
                report.violation("duplicate id while pending: answers \(answers), expected invalid-argument and result")
            }
        }
        // Hits: pending too while their file opens (off the loop): the same two answers, or
        // two RESULTs when the first was answered before the second was read.
        report.cases()
        let cached = RenderRequest(path: context.slowImages[5 % context.slowImages.count], spec: RenditionSpec(width: 300, height: 300))
        try wire.send(.render(cached), id: 200)
        try wire.send(.render(cached), id: 200)
        var answers: [String] = []
        while answers.count < 2, let (rid, message) = try wire.read(timeout: .seconds(10)) {
            guard rid == 200, message.isTerminal else { continue }
            answers.append(message.outcome)
            report.answer(message.outcome)
        }
        if answers.sorted() != ["invalid-argument", "result"] && answers != ["result", "result"] {
            report.violation("duplicate id of a cache hit: answers \(answers), expected invalid-argument and result, or two results")
        }
        wire.close()
    }

    /// Descriptors: a good one renders; write-only, a directory and a pipe are refused; one
    /// on a PING is refused; a flagged frame without one, and too many unclaimed, end the
    /// connection. The daemon keeps none of them.
    private func descriptors() throws {
        let before = daemon.descriptorCount()
        let wire = try RawSocket.greeted(path: path, name: "descriptors")
        let good = context.goodImages[2].path
        var pipeFDs: [Int32] = [-1, -1]
        pipe(&pipeFDs)
        let cases: [(fd: Int32, expected: String)] = [
            (open(good, O_RDONLY), "result"), (open(good, O_WRONLY), "permission-denied"),
            (open(context.work, O_RDONLY | O_DIRECTORY), "not-regular-file"), (pipeFDs[0], "not-regular-file"),
            (open("/dev/zero", O_RDONLY), "not-regular-file"),
        ]
        for (i, c) in cases.enumerated() {
            report.cases()
            let id = UInt32(i + 1)
            var frame = Message.render(RenderRequest(path: "passed-\(i)", spec: RenditionSpec(width: 50, height: 50))).frame(requestID: id)
            frame.flags |= FrameFlags.descriptor
            try wire.send(frame, descriptor: c.fd)
            Glibc.close(c.fd)
            guard let (rid, message) = try wire.read(timeout: renderBound), rid == id else {
                report.violation("descriptor case \(i): no answer")
                continue
            }
            report.answer(message.outcome)
            if message.outcome != c.expected { report.violation("descriptor case \(i): \(message.outcome), expected \(c.expected)") }
        }
        Glibc.close(pipeFDs[1])
        report.cases()
        var ping = Message.ping.frame(requestID: 50)
        ping.flags |= FrameFlags.descriptor
        let fd = open(good, O_RDONLY)
        try wire.send(ping, descriptor: fd)
        Glibc.close(fd)
        if let (rid, message) = try wire.read(timeout: .seconds(5)), rid == 50, message.outcome == "invalid-argument" {
            report.answer("invalid-argument")
        } else {
            report.violation("a PING with a descriptor was not answered invalid-argument")
        }
        // Flagged, no descriptor: the stream is broken.
        report.cases()
        var orphan = Message.ping.frame(requestID: 51)
        orphan.flags |= FrameFlags.descriptor
        try wire.write(orphan.bytes)
        expectFatal(wire, "a flagged frame without a descriptor")
        // 80 descriptors that no frame claims.
        report.cases()
        let flood = try RawSocket.greeted(path: path, name: "descriptor-flood")
        let file = open(good, O_RDONLY)
        for round in 0..<5 {
            let bytes = Message.ping.frame(requestID: UInt32(60 + round)).bytes
            for byte in bytes {
                let sent = try? [byte].withUnsafeBytes { try Posix.send(flood.fd, $0, descriptor: file) }
                if sent != 1 { break }
            }
        }
        Glibc.close(file)
        var sawError = false
        let frames = flood.readUntilClosed(timeout: .seconds(5))
        if frames == nil { report.violation("80 unclaimed descriptors did not end the connection") }
        for frame in frames ?? [] {
            if frame.requestID == 0, case .error(let e)? = try? Message(frame: frame), e.code == .malformedFrame { sawError = true }
        }
        if !sawError { report.violation("80 unclaimed descriptors: no ERROR malformed-frame before the close") }
        let settled = eventually(.seconds(5)) { daemon.descriptorCount() <= before + 2 }
        if !settled { report.violation("descriptors: the daemon holds \(daemon.descriptorCount()) descriptors, \(before) before") }
    }

    private func expectFatal(_ wire: RawSocket, _ what: String) {
        guard let frames = wire.readUntilClosed(timeout: .seconds(5)) else {
            report.violation("\(what) did not end the connection")
            return
        }
        let last = frames.last.flatMap { try? Message(frame: $0) }
        guard let frame = frames.last, frame.requestID == 0, case .error(let e)? = last, e.code == .malformedFrame else {
            report.violation("\(what): the connection ended without ERROR malformed-frame of id 0")
            return
        }
        report.answer(e.code!.name)
    }

    /// Thousands of connections opened and dropped: bare, after HELLO, with a render or a
    /// prefetch in flight, closed or reset. Afterwards nothing of theirs remains.
    private func churn() throws {
        let total = context.scale.churnConnections
        let queue = WorkQueue(Array(0..<total))
        let group = DispatchGroup()
        let refused = Counter()
        for _ in 0..<4 {
            group.enter()
            Thread { [self] in
                defer { group.leave() }
                while let i = queue.next() {
                    var wire: RawSocket?
                    for _ in 0..<200 {
                        do { wire = try RawSocket(path: path, sendTimeout: .seconds(5)); break } catch { refused.add(); usleep(2_000) }
                    }
                    guard let wire else {
                        report.violation("churn: could not connect for 400 ms")
                        continue
                    }
                    report.cases()
                    let slow = context.slowImages[i % context.slowImages.count]
                    let spec = RenditionSpec(width: UInt32(100 + i % 400), height: UInt32(90 + i % 300))
                    switch i % 5 {
                    case 0: break
                    case 1: try? wire.send(.hello(Hello(clientName: "churn")), id: 0)
                    case 2, 4:
                        try? wire.send(.hello(Hello(clientName: "churn")), id: 0)
                        try? wire.send(.render(RenderRequest(path: slow, spec: spec, priority: .visible)), id: 1)
                    default:
                        try? wire.send(.hello(Hello(clientName: "churn")), id: 0)
                        try? wire.send(.prefetch(PrefetchRequest(paths: Array(context.slowImages.prefix(4)), spec: spec)), id: 1)
                    }
                    if i % 5 == 4 { wire.abort() } else { wire.close() }
                }
            }.start()
        }
        group.wait()
        if refused.value > 0 { report.note("churn: \(refused.value) connects refused for a moment (listen backlog full); retried") }
    }

    /// A client that sends RENDERs of a 3 MiB cached rendition and never reads: the daemon
    /// stops reading it at its outbound limit, its memory stays bounded, others are served.
    private func neverReads() throws {
        let request = RenderRequest(path: context.goodImages[4].path, spec: RenditionSpec(width: 1024, height: 768, format: .raw, upscale: true))
        let warm = try RawSocket.greeted(path: path, name: "warm")
        try warm.send(.render(request), id: 1)
        guard let (_, first) = try warm.read(timeout: renderBound), case .result = first else {
            report.violation("never-reader: the 3 MiB rendition did not render")
            return
        }
        warm.close()
        let baseline = daemon.memory().rss
        let wire = try RawSocket.greeted(path: path, name: "never-reads")
        var pending: [UInt8] = []
        var sent = 0
        var stalled = ContinuousClock.now
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(context.settings.short ? 3 : 8) {
            if pending.isEmpty && sent < 5000 {
                sent += 1
                pending = Message.render(RenderRequest(path: request.path, spec: request.spec)).frame(requestID: UInt32(sent)).bytes
            }
            let n = wire.writeSome(pending)
            if n > 0 {
                pending.removeFirst(n)
                stalled = .now
            } else if ContinuousClock.now - stalled > .seconds(1) {
                break  // the daemon stopped reading us, as it should
            } else {
                usleep(5_000)
            }
        }
        report.cases(sent)
        usleep(500_000)
        let peak = daemon.memory().rss
        let grew = (peak - baseline) / 1024
        report.info("never-reader: \(sent) RENDERs of 3 MiB answers sent unread; daemon RSS \(baseline / 1024) -> \(peak / 1024) MiB")
        if grew > 160 { report.violation("never-reader: the daemon grew by \(grew) MiB for one client that does not read") }
        // Others are still served (the bystander checks latency); a fresh client too.
        let other = try RawSocket.greeted(path: path, name: "other")
        try other.send(.ping, id: 1)
        if try other.read(timeout: .seconds(5)) == nil { report.violation("never-reader: another client got no PONG") }
        other.close()
        wire.close()
    }
}

final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func add(_ n: Int = 1) { lock.withLock { count += n } }
    var value: Int { lock.withLock { count } }
}
