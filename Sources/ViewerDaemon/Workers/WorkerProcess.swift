import CPosix
import Foundation
import Rendering
import Locking
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
    static let channel: Int32 = 3

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
        if let parent = value(of: "--parent", in: arguments).flatMap({ pid_t($0) }), vd_die_with_parent(parent) != 0 {
            return 0
        }
        // Render workers run below the preview lane (WorkerPool): set while this is the only
        // thread, so every thread libvips starts inherits it.
        if let nice = value(of: "--nice", in: arguments).flatMap({ Int32($0) }), nice != 0 {
            _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, nice)
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
        _ = vd_limit_malloc_arenas(1)
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
            let confined = WorkerSandbox.confine(channel: channel, filesConfined: protections.contains(.filesystem),
                                                 superviseOpens: superviseOpens)
            protections.formUnion(confined.0)
            listener = confined.listener
        }
        // The filter's listener goes to the daemon with this first frame, before any job
        // (no file has been seen yet), and is closed here: only the daemon answers it.
        send(.sandbox(protections), descriptor: listener)
        if listener >= 0 { Glibc.close(listener) }
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
            if !job.infoOnly { _ = vd_release_free_memory() }
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
        var decoder = FrameDecoder(maxBodyLength: WorkerWire.maxBodyLength)
        var buffer = [UInt8](repeating: 0, count: 65536)
        var received = [Int32](repeating: -1, count: 8)
        var descriptors: [Int32] = []
        defer { jobs.close() }
        while true {
            var count: Int32 = 0
            let n = buffer.withUnsafeMutableBytes { raw in
                received.withUnsafeMutableBufferPointer { fds in
                    vd_recv_with_fds(channel, raw.baseAddress, raw.count, fds.baseAddress, Int32(fds.count), &count)
                }
            }
            descriptors.append(contentsOf: received.prefix(Int(count)))
            guard n > 0 else { return }
            decoder.append(buffer[0..<n])
            while true {
                let frame: Frame
                do throws(ProtocolError) {
                    guard let next = try decoder.next() else { break }
                    frame = next
                } catch {
                    protocolFailure("event=worker-wire-broken error=\(Log.quote(error.description))")
                }
                // The descriptors of this frame: as many as its kind carries, if it says so.
                let expected = frame.flags & FrameFlags.descriptor != 0
                    ? WorkerWire.Kind(rawValue: frame.type)?.descriptorCount ?? -1 : 0
                guard expected >= 0, expected <= descriptors.count else {
                    send(.error(id: frame.requestID, ErrorReply(.malformedFrame, "worker: descriptors do not match the frame")))
                    protocolFailure("event=worker-wire-broken error=\"descriptors do not match frame type \(frame.type)\"")
                }
                let attached = Array(descriptors.prefix(expected))
                descriptors.removeFirst(expected)
                do throws(WorkerWireError) {
                    switch try WorkerWire.decodeCommand(frame) {
                    case .render(let id, let request) where attached.count == 1:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: -1, isDerivation: false))
                    case .derive(let id, let request) where attached.count == 2:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: attached[1], isDerivation: true))
                    case .renderWithPreviewBase(let id, let request) where attached.count == 2:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: attached[1], isDerivation: false))
                    case .previewOnly(let id, let request) where attached.count == 1:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: -1, isDerivation: false,
                                           previewOnly: true))
                    case .previewOnlyWithBase(let id, let request) where attached.count == 2:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: attached[1], isDerivation: false,
                                           previewOnly: true))
                    case .cancel(let id):
                        if jobs.cancel(id) { send(.cancelled(id: id)) }
                    case .info(let id, let request) where attached.count == 1:
                        jobs.put(WorkerJob(id: id, request: RenderRequest(path: request.path, spec: RenditionSpec(width: 1, height: 1)),
                                           source: attached[0], base: -1, isDerivation: false, infoOnly: true))
                    case .renderLevel(let id, let request) where attached.count == 1:
                        jobs.put(WorkerJob(id: id, request: request, source: attached[0], base: -1, isDerivation: false,
                                           wholeLevel: true))
                    case .render, .derive, .renderWithPreviewBase, .previewOnly, .previewOnlyWithBase, .info, .renderLevel:
                        throw WorkerWireError(description: "a command without its descriptors")
                    }
                } catch {
                    for fd in attached { Glibc.close(fd) }
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

    /// Renders one job and answers it. The job's descriptors are closed by then: the source
    /// by the `SourceFile` that takes it over, the base here.
    private static func serve(_ job: WorkerJob, cancellation: RenderCancellation, renderer: Renderer, levelBudget: Int,
                              hook: JobHook?) {
        defer { if job.base >= 0 { Glibc.close(job.base) } }
        if job.infoOnly {
            let info = Result { () throws(RenderError) in
                try renderer.mediaInfo(SourceFile(descriptor: job.source, path: job.request.path))
            }
            switch info {
            case .success(let info): send(.info(id: job.id, info))
            case .failure where cancellation.isCancelled: send(.cancelled(id: job.id))
            case .failure(let error): send(.error(id: job.id, ErrorReply(error.code, error.description)))
            }
            return
        }
        let outcome: Result<Rendition, RenderError>
        if job.wholeLevel {
            // The tiles go as they are cut; the job ends with a result of no pixels.
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: job.request.path)
                try hook?(job.request.path)
                let grid = try renderer.renderLevel(source, spec: job.request.spec, memoryBudget: levelBudget,
                                                    cancellation: cancellation) { address, tile in
                    send(.tile(id: job.id, address, tile))
                }
                // No pixels: the level's grid, which tells the daemon the tiles past its edge.
                return Rendition(format: job.request.spec.format, width: UInt32(grid.columns), height: UInt32(grid.rows), bytes: [])
            }
        } else if job.isDerivation {
            outcome = Result { () throws(RenderError) in try derive(job, cancellation: cancellation, renderer: renderer) }
        } else if job.previewOnly {
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: job.request.path)
                let stored = job.base >= 0 ? try? readBase(job.base) : nil
                guard let preview = try renderer.preview(source, spec: job.request.spec, stored: stored, cancellation: cancellation) else {
                    throw .invalidSpec("no source of a preview is cheap enough (\(job.request.path))")
                }
                return preview
            }
        } else {
            outcome = Result { () throws(RenderError) in
                let source = try SourceFile(descriptor: job.source, path: job.request.path)
                try hook?(job.request.path)
                if job.request.delivery == .opportunistic {
                    // A preview is optional: when it fails, the final render says why.
                    let stored = job.base >= 0 ? try? readBase(job.base) : nil
                    if let preview = try? renderer.preview(source, spec: job.request.spec, stored: stored, cancellation: cancellation) {
                        send(.preview(id: job.id, preview))
                    }
                }
                return try renderer.render(source, spec: job.request.spec, cancellation: cancellation)
            }
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
    private static func derive(_ job: WorkerJob, cancellation: RenderCancellation, renderer: Renderer) throws(RenderError) -> Rendition {
        if job.request.spec.region != nil {
            // A region of a stored rendition of the whole image, sized by the source's upright
            // size; from the source itself when the rendition is too small after all.
            let source = try SourceFile(descriptor: job.source, path: job.request.path)
            let header = try renderer.header(of: source)
            if header.isVideo, let refusal = Renderer.zoomRefusedForVideo(job.request.spec, path: job.request.path) { throw refusal }
            let image = Renderer.upright(header)
            if let region = try renderer.renderRegion(fromBase: readBase(job.base), spec: job.request.spec, image: image,
                                                      cancellation: cancellation) { return region }
            return try renderer.render(source, spec: job.request.spec, cancellation: cancellation)
        }
        var size: (width: Int, height: Int)?
        do throws(RenderError) {
            size = try renderer.plannedSize(SourceFile(descriptor: job.source, path: job.request.path), spec: job.request.spec)
        } catch {
            size = nil
        }
        let base = try readBase(job.base)
        return try renderer.render(bytes: base, spec: job.request.spec, size: size, cancellation: cancellation)
    }

    /// The bytes of a sealed memfd (its size cannot change while it is read).
    private static func readBase(_ fd: Int32) throws(RenderError) -> [UInt8] {
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw .unreadable(path: "<derivation base>", errno: errno) }
        let count = Int(info.st_size)
        var failure: Int32 = 0
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            while initialized < count {
                let n = pread(fd, buffer.baseAddress! + initialized, count - initialized, off_t(initialized))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    failure = n == 0 ? EIO : errno
                    return
                }
                initialized += n
            }
        }
        guard failure == 0 else { throw .unreadable(path: "<derivation base>", errno: failure) }
        return bytes
    }

    /// Writes whole frames, one at a time: the main thread's answers and the reader thread's
    /// (CANCELLED of a queued job, ERROR of a malformed command) must not interleave.
    /// It holds the count of frames written (not `Locked<Void>`: see `Log.lock`).
    private static let writeLock = Locked<UInt64>(0)

    static func send(_ reply: WorkerReply, descriptor: Int32 = -1) {
        let bytes = WorkerWire.encode(reply)
        writeLock.withLock { frames in
            frames &+= 1
            var offset = 0
            if descriptor >= 0 {
                // The descriptor travels with the frame's first byte (SCM_RIGHTS).
                var passed = descriptor
                guard bytes.withUnsafeBytes({ vd_send_with_fds(channel, $0.baseAddress, 1, &passed, 1) }) == 1 else { exit(0) }
                offset = 1
            }
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.send(channel, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { exit(0) }  // the daemon is gone
                offset += n
            }
        }
    }
}
