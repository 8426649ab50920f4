import Foundation
import Rendering
import SystemCalls
import ViewerLog
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The decode worker: `viewerd --worker`, started by the daemon with a socket as descriptor 3.
///
/// It speaks the private worker wire (`WorkerWire`) on that socket: the daemon sends render,
/// derive and cancel commands (the source, and a derivation's base, travel as descriptors);
/// the worker answers preview (when the job is `opportunistic`), then result, error or
/// cancelled. One job at a time. A reader thread takes commands as they come so that a
/// cancel can stop the render in progress; the main thread renders.
public enum WorkerProcess {
    /// Descriptor 3, as the daemon started it (`Posix.spawnWorker`).
    static let channel = WorkerChannel(socket: 3, readSize: 65536)

    /// A test's act inside a job, after the source is open and before the render: the test
    /// executable's worker (`viewerd-testing --worker`, Tests/DaemonTesting) passes one that
    /// crashes, hangs or tries a forbidden call; the product's `viewerd --worker` passes none,
    /// and has no other fault.
    public typealias JobHook = @Sendable (_ path: String) throws(RenderError) -> Void

    /// Serves jobs until the daemon closes the socket. Returns the exit status.
    public static func run(arguments: [String], hook: JobHook? = nil) -> Int32 {
        // A worker must not outlive its daemon, even stuck in a decode: the kernel kills it
        // when the daemon's thread that started it ends (the slot thread, which lives until
        // the pool stops). The daemon may have died before this line: then ours is gone.
        if let parent = value(of: "--parent", in: arguments).flatMap({ pid_t($0) }), !Posix.dieWithParent(parent) {
            return 0
        }
        // Render workers run below the preview lane (WorkerPool): set while this is the only
        // thread, so every thread libvips starts inherits it.
        if let nice = value(of: "--nice", in: arguments).flatMap({ Int32($0) }), nice != 0 {
            try? Posix.setNice(nice)  // a worker that keeps the daemon's priority still renders
        }
        // The sandbox (WorkerSandbox): namespaces while the process has one thread, limits,
        // then libvips warmed, then the filter, all before the first command is read.
        let environment = ProcessInfo.processInfo.environment
        // The daemon's `sandbox` setting; a value this worker does not know means the whole
        // sandbox, never less.
        let setting = value(of: "--sandbox", in: arguments).flatMap(SandboxSetting.init(name:)) ?? .on
        let sandboxed = setting != .off
        let superviseOpens = setting == .on
        var protections: WorkerProtections = []
        if sandboxed {
            protections = WorkerSandbox.isolate()
            protections.formUnion(WorkerSandbox.restrictFiles(environment: environment))
        }
        // One render at a time needs one heap: per-thread arenas each keep their freed
        // memory, and a worker's resident size grew with every file it had decoded (make
        // bench: 499 MiB peak for two workers; with one arena, under the budget).
        Posix.limitMallocArenas(1)
        var sandboxLimits = WorkerSandbox.Limits()
        sandboxLimits.addressSpace = value(of: "--memory-limit", in: arguments).flatMap({ UInt64($0) }) ?? 0
        sandboxLimits.cpuSeconds = value(of: "--cpu-limit", in: arguments).flatMap({ UInt64($0) }) ?? 0
        protections.formUnion(WorkerSandbox.limit(sandboxLimits))
        var limits = RenderLimits()
        if let pixels = value(of: "--max-pixels", in: arguments).flatMap({ UInt64($0) }) {
            limits.maxSourcePixels = pixels
        }
        do throws(RenderError) {
            try Renderer.setUp(programName: "viewerd-worker")
        } catch {
            Log.error("event=worker-start-failed error=\(Log.quote(error.description))")
            return 70
        }
        let renderer = Renderer(limits: limits)
        // A level held whole in memory takes at most an eighth of the address space allowed
        // (256 MiB at the default 4 GiB: a 50 MP photo's RGB level); larger ones go in strips.
        let levelBudget = sandboxLimits.addressSpace == 0 ? Renderer.levelMemoryBudget
            : min(Int(sandboxLimits.addressSpace / 8), Renderer.levelMemoryBudget)
        var listener: Int32 = -1
        if sandboxed {
            WorkerSandbox.warmUp(renderer, text: !protections.contains(.filesystem))
            let confined = WorkerSandbox.confine(channel: channel.socket, filesConfined: protections.contains(.filesystem),
                                                 superviseOpens: superviseOpens)
            protections.formUnion(confined.0)
            listener = confined.listener
        }
        // The filter's listener goes to the daemon with this first frame, before any job
        // (no file has been seen yet), and is closed here: only the daemon answers it.
        send(.sandbox(protections), descriptors: listener >= 0 ? [listener] : [])
        if listener >= 0 { Posix.close(listener) }
        let jobs = WorkerInbox()
        let reader = Thread { readCommands(into: jobs) }
        reader.name = "viewerd-worker-reader"
        reader.start()
        while let (job, cancellation) = jobs.take() {
            serve(job, cancellation: cancellation, renderer: renderer, levelBudget: levelBudget, hook: hook)
            // A big decode leaves glibc's heap large; hand the pages back between jobs so a
            // worker's resident size follows the job it runs, not the largest it ever ran. A
            // header read grows nothing worth the walk of the heap, which would delay the
            // next INFO of a grid being laid out.
            if job.command.kind != .info { Posix.releaseFreeMemory() }
        }
        return 0
    }

    private static func value(of option: String, in arguments: [String]) -> String? {
        guard let index = arguments.firstIndex(of: option), index + 1 < arguments.count else { return nil }
        return arguments[index + 1]
    }

    /// Reads commands until the daemon closes the socket. A frame it cannot decode is
    /// answered ERROR `malformed-frame` at once; a stream it cannot follow any more (a bad
    /// header, descriptors it cannot match to frames) ends the worker.
    private static func readCommands(into jobs: WorkerInbox) {
        defer { jobs.close() }
        while (try? channel.receive()) == true {  // a failed read ends the stream as its end does
            while true {
                let frame: Frame
                do throws(ProtocolError) {
                    guard let next = try channel.nextFrame() else { break }
                    frame = next
                } catch {
                    protocolFailure("event=worker-wire-broken error=\(Log.quote(error.description))")
                }
                // The descriptors of this frame: as many as its kind carries, if it says so.
                let expected = frame.flags & FrameFlags.descriptor != 0
                    ? WorkerWire.Kind(rawValue: frame.type)?.descriptorCount ?? -1 : 0
                guard expected >= 0, let attached = channel.claimDescriptors(expected) else {
                    send(.error(id: frame.requestID, ErrorReply(.malformedFrame, "worker: descriptors do not match the frame")))
                    protocolFailure("event=worker-wire-broken error=\"descriptors do not match frame type \(frame.type)\"")
                }
                do throws(WorkerWireError) {
                    let command = try WorkerWire.decodeCommand(frame)
                    if case .cancel(let id) = command {
                        if jobs.cancel(id) { send(.cancelled(id: id)) }
                    } else if let job = WorkerJob(command, descriptors: attached) {
                        jobs.put(job)
                    } else {
                        throw WorkerWireError(description: "a command without its descriptors")
                    }
                } catch {
                    for fd in attached { Posix.close(fd) }
                    send(.error(id: frame.requestID, ErrorReply(.malformedFrame, "worker: \(error.description)")))
                }
            }
        }
    }

    /// Ends the worker on a stream it cannot follow; the daemon sees the status.
    private static func protocolFailure(_ line: String) -> Never {
        Log.error(line)
        exit(WorkerWire.protocolErrorStatus)
    }

    /// Serves one job and answers it. The job's descriptors are closed by then: the source
    /// by the `SourceFile` that takes it over, the base here.
    private static func serve(_ job: WorkerJob, cancellation: RenderCancellation, renderer: Renderer, levelBudget: Int,
                              hook: JobHook?) {
        defer { if job.base >= 0 { Posix.close(job.base) } }
        let outcome: Result<Rendition, RenderError>
        switch job.command {
        case .info(let id, let request):
            let info = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: request.path)
                try hook?(request.path)
                return try renderer.mediaInfo(source)
            }
            switch info {
            case .success(let info): send(.info(id: id, info))
            case .failure where cancellation.isCancelled: send(.cancelled(id: id))
            case .failure(let error): send(.error(id: id, ErrorReply(error.code, error.description)))
            }
            return
        case .renderLevel(_, let request):
            // The tiles go as they are cut; the job ends with a result of no pixels.
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: request.path)
                try hook?(request.path)
                let grid = try renderer.renderLevel(source, spec: request.spec, memoryBudget: levelBudget,
                                                    cancellation: cancellation) { address, tile in
                    send(.tile(id: job.id, address, tile))
                }
                // No pixels: the level's grid, which tells the daemon the tiles past its edge.
                return Rendition(format: request.spec.format, width: UInt32(grid.columns), height: UInt32(grid.rows), bytes: [])
            }
        case .derive(_, let request):
            outcome = Result { () throws(RenderError) in
                try derive(request, source: job.source, base: job.base, cancellation: cancellation, renderer: renderer)
            }
        case .previewOnly(_, let request), .previewOnlyWithBase(_, let request):
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: request.path)
                let stored = job.base >= 0 ? try? readBase(job.base) : nil
                guard let preview = try renderer.preview(source, spec: request.spec, stored: stored, cancellation: cancellation) else {
                    throw .invalidSpec("no source of a preview is cheap enough (\(request.path))")
                }
                return preview
            }
        case .render(_, let request), .renderWithPreviewBase(_, let request):
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: request.path)
                try hook?(request.path)
                if request.delivery == .opportunistic {
                    // A preview is optional: when it fails, the final render says why.
                    let stored = job.base >= 0 ? try? readBase(job.base) : nil
                    if let preview = try? renderer.preview(source, spec: request.spec, stored: stored, cancellation: cancellation) {
                        send(.preview(id: job.id, preview))
                    }
                }
                return try renderer.render(source, spec: request.spec, cancellation: cancellation,
                                           placeholder: request.sourceInfo)
            }
        case .cancel:
            preconditionFailure("a cancel is not a job (WorkerJob)")
        }
        switch outcome {
        case .success(let rendition): send(.result(id: job.id, rendition))
        case .failure where cancellation.isCancelled: send(.cancelled(id: job.id))
        case .failure(let error): send(.error(id: job.id, ErrorReply(error.code, error.description)))
        }
    }

    /// Renders from the stored rendition in the base memfd, the size a direct render of the
    /// source would have (libvips' plan). Without that plan (the original no longer reads),
    /// the derivation sizes itself from the rendition, which may differ by a pixel.
    private static func derive(_ request: RenderRequest, source descriptor: Int32, base: Int32, cancellation: RenderCancellation,
                               renderer: Renderer) throws(RenderError) -> Rendition {
        if request.spec.region != nil {
            // A region of a stored rendition of the whole image, sized by the source's upright
            // size; from the source itself when the rendition is too small after all.
            let source = try SourceFile(descriptor: descriptor, path: request.path)
            let header = try renderer.header(of: source)
            if let refusal = Renderer.zoomRefusal(request.spec, format: header.format, path: request.path) { throw refusal }
            let image = Renderer.upright(header)
            if let region = try renderer.renderRegion(fromBase: readBase(base), spec: request.spec, image: image,
                                                      cancellation: cancellation) { return region }
            return try renderer.render(source, spec: request.spec, cancellation: cancellation,
                                           placeholder: request.sourceInfo)
        }
        var size: (width: Int, height: Int)?
        do throws(RenderError) {
            size = try renderer.plannedSize(SourceFile(descriptor: descriptor, path: request.path), spec: request.spec)
        } catch {
            size = nil
        }
        let base = try readBase(base)
        return try renderer.render(bytes: base, spec: request.spec, size: size, cancellation: cancellation)
    }

    /// The bytes of a sealed memfd (its size cannot change while it is read).
    private static func readBase(_ fd: Int32) throws(RenderError) -> [UInt8] {
        do throws(SystemError) {
            return try Posix.readWhole(fd)
        } catch {
            throw .unreadable(path: "<derivation base>", errno: error.errno)
        }
    }

    /// Sends one reply, whole: the main thread's answers and the reader thread's (CANCELLED
    /// of a queued job, ERROR of a malformed command) never interleave (`WorkerChannel`). A
    /// reply the daemon cannot take means it is gone: nobody is left to serve, and the worker
    /// exits (a call the sandbox allows, unlike a shutdown of the socket).
    static func send(_ reply: WorkerReply, descriptors: [Int32] = []) {
        do throws(SystemError) {
            try channel.send(WorkerWire.encode(reply), descriptors: descriptors)
        } catch {
            exit(0)
        }
    }
}
