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
/// It speaks a subset of the public protocol on that socket: the daemon sends RENDER frames
/// (the source travels as a descriptor, SCM_RIGHTS) and CANCEL; the worker answers PREVIEW
/// (when the job is `opportunistic`), then RESULT, ERROR or CANCELLED. One job at a time.
/// A reader thread takes frames as they come so that a CANCEL can stop the render in
/// progress; the main thread renders and is the only writer.
public enum WorkerProcess {
    static let channel: Int32 = 3

    /// Serves jobs until the daemon closes the socket. Returns the exit status.
    public static func run(arguments: [String]) -> Int32 {
        // One render at a time needs one heap: per-thread arenas each keep their freed
        // memory, and a worker's resident size grew with every file it had decoded (make
        // bench: 499 MiB peak for two workers; with one arena, under the budget).
        _ = vd_limit_malloc_arenas(1)
        if let index = arguments.firstIndex(of: "--memory-limit"), index + 1 < arguments.count,
           let bytes = UInt64(arguments[index + 1]), bytes > 0 {
            // ThreadSanitizer and AddressSanitizer reserve terabytes of address space for their
            // shadow memory: under RLIMIT_AS they cannot even start (make sanitize).
            if dlsym(nil, "__tsan_init") == nil && dlsym(nil, "__asan_init") == nil {
                _ = vd_limit_address_space(bytes)
            }
        }
        var limits = RenderLimits()
        if let index = arguments.firstIndex(of: "--max-pixels"), index + 1 < arguments.count,
           let pixels = UInt64(arguments[index + 1]) {
            limits.maxSourcePixels = pixels
        }
        do throws(RenderError) {
            try Renderer.setUp(programName: "viewerd-worker")
        } catch {
            Log.error("event=worker-start-failed error=\(Log.quote(error.description))")
            return 70
        }
        let jobs = JobInbox()
        let reader = Thread { readFrames(into: jobs) }
        reader.name = "viewerd-worker-reader"
        reader.start()
        let renderer = Renderer(limits: limits)
        let faults = ProcessInfo.processInfo.environment["VIEWERD_TEST_FAULTS"] == "1"
        while let (job, cancellation) = jobs.take() {
            serve(job, cancellation: cancellation, renderer: renderer, faults: faults)
            // A big decode leaves glibc's heap large; hand the pages back between jobs so a
            // worker's resident size follows the job it runs, not the largest it ever ran.
            _ = vd_release_free_memory()
        }
        return 0
    }

    struct Job {
        let id: UInt32
        let request: RenderRequest
        /// The source file (for a derivation too: its plan gives the size to make).
        let descriptor: Int32
        /// For a derivation: the encoded rendition to render from.
        var base: [UInt8]? = nil
    }

    /// Daemon-to-worker only: a RENDER body plus field 100, the bytes of a stored rendition
    /// to render from instead of the source file, which comes with it as a descriptor.
    static let deriveType: UInt8 = 0x40
    static let baseTag: UInt16 = 100

    static func deriveFrame(_ request: RenderRequest, from base: [UInt8], id: UInt32) -> Frame {
        var extra = FieldWriter()
        extra.put(baseTag, bytes: base)
        return Frame(type: deriveType, requestID: id, body: Message.render(request).body() + extra.bytes)
    }

    /// The jobs the reader thread received, and the id of the one being rendered.
    final class JobInbox: Sendable {
        private let state = Locked<(queue: [Job], closed: Bool, current: (id: UInt32, cancellation: RenderCancellation)?)>(([], false, nil))
        private let available = DispatchSemaphore(value: 0)

        func put(_ job: Job) {
            state.withLock { $0.queue.append(job) }
            available.signal()
        }

        func close() {
            state.withLock { $0.closed = true }
            available.signal()
        }

        /// The next job and what stops it, or nil once the daemon has gone.
        func take() -> (Job, RenderCancellation)? {
            while true {
                available.wait()
                let next = state.withLock { s -> ((Job, RenderCancellation)?, Bool) in
                    if !s.queue.isEmpty {
                        let job = s.queue.removeFirst()
                        let cancellation = RenderCancellation()
                        s.current = (job.id, cancellation)
                        return ((job, cancellation), false)
                    }
                    return (nil, s.closed)
                }
                if let taken = next.0 { return taken }
                if next.1 { return nil }
            }
        }

        /// Cancels `id` if it is queued (returns true) or asks the running render to stop.
        func cancel(_ id: UInt32) -> Bool {
            state.withLock { s in
                if let index = s.queue.firstIndex(where: { $0.id == id }) {
                    let job = s.queue.remove(at: index)
                    if job.descriptor >= 0 { Glibc.close(job.descriptor) }
                    return true
                }
                if let current = s.current, current.id == id { current.cancellation.cancel() }
                return false
            }
        }
    }

    private static func readFrames(into jobs: JobInbox) {
        var decoder = FrameDecoder(maxBodyLength: 1 << 20)
        var buffer = [UInt8](repeating: 0, count: 16384)
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
            while let frame = try? decoder.next() {
                if frame.type == deriveType {
                    let descriptor = frame.flags & FrameFlags.descriptor != 0 && !descriptors.isEmpty ? descriptors.removeFirst() : -1
                    let asRender = Frame(type: MessageType.render.rawValue, requestID: frame.requestID, body: frame.body)
                    if case .render(let request)? = try? Message(frame: asRender),
                       let fields = try? FieldReader(frame.body, message: "derive"), let base = fields.bytes(baseTag) {
                        jobs.put(Job(id: frame.requestID, request: request, descriptor: descriptor, base: Array(base)))
                    } else if descriptor >= 0 {
                        Glibc.close(descriptor)
                    }
                    continue
                }
                guard let message = try? Message(frame: frame) else { continue }
                switch message {
                case .render(let request) where frame.flags & FrameFlags.descriptor != 0 && !descriptors.isEmpty:
                    jobs.put(Job(id: frame.requestID, request: request, descriptor: descriptors.removeFirst()))
                case .cancel:
                    if jobs.cancel(frame.requestID) { send(.cancelled, id: frame.requestID) }
                default:
                    continue
                }
            }
        }
    }

    private static func serve(_ job: Job, cancellation: RenderCancellation, renderer: Renderer, faults: Bool) {
        if let base = job.base {
            // The size a direct render would make; without it (the original no longer reads),
            // the derivation sizes itself from the rendition, which may differ by a pixel.
            let size = job.descriptor < 0 ? nil
                : (try? SourceFile(descriptor: job.descriptor, path: job.request.path)).flatMap {
                    try? renderer.plannedSize($0, spec: job.request.spec)
                }
            do throws(RenderError) {
                let rendition = try renderer.render(bytes: base, spec: job.request.spec, size: size, cancellation: cancellation)
                send(.result(RenderResult(format: rendition.format, width: rendition.width, height: rendition.height,
                                          fromCache: false, bytes: rendition.bytes)), id: job.id)
            } catch {
                send(cancellation.isCancelled ? .cancelled : .error(ErrorReply(error.code, error.description)), id: job.id)
            }
            return
        }
        let source: SourceFile
        do throws(RenderError) {
            source = try SourceFile(descriptor: job.descriptor, path: job.request.path)
        } catch {
            send(.error(ErrorReply(error.code, error.description)), id: job.id)
            return
        }
        if faults { injectFault(path: job.request.path) }
        if job.request.delivery == .opportunistic, let preview = try? renderer.preview(source, spec: job.request.spec, cancellation: cancellation) {
            send(.preview(RenderResult(format: preview.format, width: preview.width, height: preview.height,
                                       fromCache: false, bytes: preview.bytes)), id: job.id)
        }
        do throws(RenderError) {
            let rendition = try renderer.render(source, spec: job.request.spec, cancellation: cancellation)
            send(.result(RenderResult(format: rendition.format, width: rendition.width, height: rendition.height,
                                      fromCache: false, bytes: rendition.bytes)), id: job.id)
        } catch {
            send(cancellation.isCancelled ? .cancelled : .error(ErrorReply(error.code, error.description)), id: job.id)
        }
    }

    /// Test-only faults, honoured only with VIEWERD_TEST_FAULTS=1 in the daemon's environment.
    private static func injectFault(path: String) {
        if path.contains("viewerd-test-crash") { abort() }
        if path.contains("viewerd-test-hang") { while true { sleep(3600) } }
    }

    /// Writes one frame to the daemon; only the main thread writes (and the reader thread
    /// for CANCELLED of a queued job, which cannot interleave: writes of whole frames are
    /// serialized by `writeLock`).
    private static let writeLock = Locked<Void>(())

    static func send(_ message: Message, id: UInt32) {
        let bytes = message.frame(requestID: id).bytes
        writeLock.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let n = bytes.withUnsafeBytes { Glibc.send(channel, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { exit(0) }  // the daemon is gone
                offset += n
            }
        }
    }
}
