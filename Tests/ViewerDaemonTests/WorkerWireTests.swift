import Rendering
import Testing
@testable import ViewerDaemon
import ViewerProtocol

@Suite("WorkerWire")
struct WorkerWireTests {
    static let request = RenderRequest(path: "/photos/a b.jpg", spec: RenditionSpec(width: 256, height: 200, format: .webp),
                                       priority: .visible, delivery: .opportunistic)
    static let rendition = Rendition(format: .png, width: 3, height: 2, bytes: [1, 2, 3, 4, 5])

    static let commands: [WorkerCommand] = [.render(id: 1, request), .derive(id: 2, request), .cancel(id: 3),
                                            .renderWithPreviewBase(id: 4, request), .previewOnly(id: 5, request),
                                            .previewOnlyWithBase(id: 6, request), .info(id: 7, InfoRequest(path: "/videos/c d.mp4")),
                                            .renderLevel(id: 8, tileRequest)]
    static let tileRequest: RenderRequest = {
        var spec = RenditionSpec(width: 0, height: 0, format: .png)
        spec.tile = TileAddress(level: 12, column: 3, row: 7)
        return RenderRequest(path: "/photos/big.jpg", spec: spec, priority: .visible)
    }()
    static let replies: [WorkerReply] = [
        .sandbox([.seccomp, .noNewPrivs, .filesystem, .resourceLimits]),
        .sandbox([]),
        .preview(id: 4, rendition), .result(id: 5, rendition),
        .error(id: 6, ErrorReply(.corruptImage, "corrupt image: bad (x.jpg)")), .cancelled(id: 7),
        .info(id: 8, MediaInfo(kind: .animated, width: 640, height: 480, frames: 12, format: "gif", hasAlpha: true)),
        .tile(id: 9, TileAddress(level: 12, column: 23, row: 15, size: 512, overlap: 0), rendition),
        .result(id: 10, Rendition(format: .jpeg, width: 3, height: 4, bytes: [7],
                                  source: MediaInfo(kind: .photo, width: 300, height: 400, format: "jpeg"))),
    ]

    /// Feeds `bytes` one byte at a time and returns the frames.
    func frames(_ bytes: [UInt8]) throws -> [Frame] {
        var decoder = FrameDecoder(maxBodyLength: WorkerWire.maxBodyLength)
        var out: [Frame] = []
        for byte in bytes {
            decoder.append([byte])
            while let frame = try decoder.next() { out.append(frame) }
        }
        return out
    }

    @Test("every command decodes to itself, fed a byte at a time", arguments: commands)
    func command(_ command: WorkerCommand) throws {
        let decoded = try frames(WorkerWire.encode(command)).map { try WorkerWire.decodeCommand($0) }
        #expect(decoded == [command])
    }

    @Test("every reply decodes to itself, fed a byte at a time", arguments: replies)
    func reply(_ reply: WorkerReply) throws {
        let decoded = try frames(WorkerWire.encode(reply)).map { try WorkerWire.decodeReply($0) }
        #expect(decoded == [reply])
    }

    @Test("every kind of render is its own message, and say how many descriptors come with them")
    func kinds() throws {
        let render = try #require(try frames(WorkerWire.encode(.render(id: 1, Self.request))).first)
        let derive = try #require(try frames(WorkerWire.encode(.derive(id: 1, Self.request))).first)
        let previewed = try #require(try frames(WorkerWire.encode(.renderWithPreviewBase(id: 1, Self.request))).first)
        let previewOnly = try #require(try frames(WorkerWire.encode(.previewOnly(id: 1, Self.request))).first)
        let previewOnlyWithBase = try #require(try frames(WorkerWire.encode(.previewOnlyWithBase(id: 1, Self.request))).first)
        #expect(Set([render.type, derive.type, previewed.type, previewOnly.type, previewOnlyWithBase.type]).count == 5)
        #expect(WorkerWire.Kind(rawValue: previewOnly.type)?.descriptorCount == 1)
        #expect(WorkerWire.Kind(rawValue: previewOnlyWithBase.type)?.descriptorCount == 2)
        #expect(WorkerWire.Kind(rawValue: render.type)?.descriptorCount == 1)
        #expect(WorkerWire.Kind(rawValue: derive.type)?.descriptorCount == 2)
        #expect(WorkerWire.Kind(rawValue: previewed.type)?.descriptorCount == 2)
        #expect([render, derive, previewed].allSatisfy { $0.flags & FrameFlags.descriptor != 0 })
        let info = try #require(try frames(WorkerWire.encode(.info(id: 1, InfoRequest(path: "/a.jpg")))).first)
        #expect(WorkerWire.Kind(rawValue: info.type)?.descriptorCount == 1)
        #expect(info.flags & FrameFlags.descriptor != 0)
        let level = try #require(try frames(WorkerWire.encode(.renderLevel(id: 1, Self.tileRequest))).first)
        #expect(WorkerWire.Kind(rawValue: level.type)?.descriptorCount == 1 && level.type != render.type)
    }

    @Test("every command travels as its own kind, flagged when descriptors come with it", arguments: commands)
    func commandKind(_ command: WorkerCommand) throws {
        let frame = try #require(try frames(WorkerWire.encode(command)).first)
        #expect(frame.type == command.kind.rawValue)
        #expect((frame.flags & FrameFlags.descriptor != 0) == (command.kind.descriptorCount > 0))
    }

    @Test("the worker keeps the command it was sent: a job is a command with as many descriptors as its kind carries",
          arguments: commands)
    func job(_ command: WorkerCommand) {
        let count = command.kind.descriptorCount
        let job = WorkerJob(command, descriptors: Array(Int32(10)..<Int32(10 + count)))
        if case .cancel = command {
            #expect(job == nil)  // a cancel stops a job, it is none
            return
        }
        #expect(job?.command == command)
        #expect(job?.source == 10)
        #expect(job?.base == (count > 1 ? 11 : -1))
        #expect(WorkerJob(command, descriptors: Array(Int32(10)..<Int32(9 + count))) == nil)
        #expect(WorkerJob(command, descriptors: Array(Int32(10)...Int32(10 + count))) == nil)
    }

    @Test("INFO stays an info read of its path on the worker's side, not a render of a 1x1 spec")
    func infoJob() throws {
        let command = WorkerCommand.info(id: 9, InfoRequest(path: "/videos/c d.mp4"))
        let decoded = try #require(try frames(WorkerWire.encode(command)).first.map { try WorkerWire.decodeCommand($0) })
        let job = try #require(WorkerJob(decoded, descriptors: [10]))
        guard case .info(9, let request) = job.command else {
            Issue.record("the job's command: \(job.command)")
            return
        }
        #expect(request.path == "/videos/c d.mp4")
    }

    @Test("a tile reply too short for its address is an error")
    func shortTile() throws {
        var frame = try #require(try frames(WorkerWire.encode(.tile(id: 2, TileAddress(level: 1, column: 0, row: 0),
                                                                    Self.rendition))).first)
        frame.body = Array(frame.body.prefix(11))
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeReply(frame) }
    }

    @Test("a reply is not a command, nor a command a reply, nor a public message either")
    func wrongDirection() throws {
        let reply = try #require(try frames(WorkerWire.encode(.cancelled(id: 1))).first)
        let command = try #require(try frames(WorkerWire.encode(.cancel(id: 1))).first)
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeCommand(reply) }
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeReply(command) }
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeCommand(Message.render(Self.request).frame(requestID: 1)) }
    }

    @Test("a body that does not decode is an error, not a frame to skip")
    func badBody() throws {
        var frame = try #require(try frames(WorkerWire.encode(.render(id: 9, Self.request))).first)
        frame.body = Array(frame.body.prefix(5))
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeCommand(frame) }
        var result = try #require(try frames(WorkerWire.encode(.result(id: 9, Self.rendition))).first)
        result.body = [0xFF, 0xFF, 0xFF]
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeReply(result) }
    }

    @Test("a sandbox report is one byte: any other length is an error")
    func sandboxReportLength() throws {
        var frame = try #require(try frames(WorkerWire.encode(.sandbox(.seccomp))).first)
        frame.body = [1, 2]
        #expect(throws: WorkerWireError.self) { try WorkerWire.decodeReply(frame) }
    }

    @Test("both ends accept the largest reply: a raw rendition of the largest side")
    func limit() {
        let side = UInt64(RenderLimits().maxOutputSide)
        #expect(UInt64(WorkerWire.maxBodyLength) > side * side * 4)
    }
}

extension WorkerCommand: CustomTestStringConvertible {
    public var testDescription: String {
        switch self {
        case .render(let id, _): "render \(id)"
        case .derive(let id, _): "derive \(id)"
        case .renderWithPreviewBase(let id, _): "render with a preview base \(id)"
        case .previewOnly(let id, _): "preview only \(id)"
        case .previewOnlyWithBase(let id, _): "preview only with a base \(id)"
        case .cancel(let id): "cancel \(id)"
        case .info(let id, _): "info \(id)"
        case .renderLevel(let id, _): "render a level \(id)"
        }
    }
}

extension WorkerReply: CustomTestStringConvertible {
    public var testDescription: String {
        switch self {
        case .sandbox(let protections): "sandbox \(protections.rawValue)"
        case .preview(let id, _): "preview \(id)"
        case .result(let id, _): "result \(id)"
        case .error(let id, _): "error \(id)"
        case .cancelled(let id): "cancelled \(id)"
        case .info(let id, _): "info \(id)"
        case .tile(let id, let address, _): "tile \(id) \(address)"
        }
    }
}
