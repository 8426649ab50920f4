import HTTPMessage
import HTTPServer
import IIIF
import ViewerClient
import ViewerLog
import ViewerProtocol

/// The IIIF rules (`Sources/IIIF`, passive) run against the daemon: each `IIIFStep` the rules
/// return is either the answer, or a call to make (INFO of the resolved file, then RENDER of
/// the plan) whose outcome the rules turn into the next step. The render is the daemon's
/// ordinary RENDER, so a tile a browser asks is the stored rendition a native pager's tile is,
/// and a client that goes away cancels it (`HTTPReply.onClientGone`: the daemon drops the job
/// if no other client waits on it).
///
/// What the front remembers (`IIIFMemory`) answers first, on the server's own thread: an
/// error, a 304, an answer kept under its ETag, info.json from a kept INFO. Only a request
/// that needs the daemon becomes a task, so a warm tile costs the file's stat and a lookup.
extension Front {
    func serveIIIF(_ request: HTTPRequest, reply: HTTPReply) {
        var known: (release: String, step: IIIFStep)?
        if let release = memory.daemonRelease {
            let step = recalled(rules(release).handle(request))
            if case .respond(let response) = step {
                reply.send(response)
                return
            }
            known = (release, step)
        }
        let client = client, metrics = metrics, memory = memory
        let priority = RequestPriority.of(request.headers)
        let task = Task {
            // The daemon's release is part of every ETag (another release may render other
            // bytes); without a daemon there is nothing to serve but a 503.
            let release: String
            do {
                release = try await client.server.serverVersion
            } catch {
                Log.warning("event=daemon-unavailable error=\(Log.quote("\(error)"))")
                reply.send(.text(503, "the daemon is unavailable: retry shortly",
                                 headers: ["Retry-After": "1", "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*"]))
                return
            }
            memory.learned(daemonRelease: release)
            var step = known?.release == release ? known!.step : self.recalled(self.rules(release).handle(request))
            while !Task.isCancelled {
                switch step {
                case .respond(let response):
                    reply.send(response)
                    return
                case .info(let need):
                    let info = await Self.info(need.path, file: need.file, client: client)
                    if case .success(let found) = info { memory.keep(found, path: need.path, identity: need.identity) }
                    step = need.answer(info)
                    if case .respond(let response) = step { memory.keep(response, key: need.answerKey) }
                case .render(let need):
                    let rendered = await Self.render(need, priority: priority, client: client)
                    if case .success(let result) = rendered { metrics.recordRendition(fromCache: result.fromCache) }
                    let response = need.answer(rendered.map { IIIFRendered(bytes: $0.bytes) })
                    memory.keep(response, key: need.answerKey)
                    reply.send(response)
                    return
                }
            }
        }
        reply.onClientGone { task.cancel() }
    }

    /// The rules, with the daemon's release in their ETags.
    func rules(_ release: String) -> IIIFFront {
        var configuration = iiifConfiguration
        configuration.rendererVersion = "viewerd " + release
        return IIIFFront(configuration)
    }

    /// `step` advanced as far as the front's memory takes it: a kept answer, or the step
    /// after a kept INFO (info.json, the render, or the request's error).
    func recalled(_ step: IIIFStep) -> IIIFStep {
        guard case .info(let need) = step else { return step }
        if let kept = memory.response(need.answerKey) {
            metrics.recordRemembered()
            return .respond(need.answer(kept: kept))
        }
        guard let info = memory.info(path: need.path, identity: need.identity) else { return step }
        let next = need.answer(.success(info))
        if case .respond(let response) = next { memory.keep(response, key: need.answerKey) }
        return next
    }

    /// The rules' configuration from the command line (the renderer version is the daemon's,
    /// added per request).
    var iiifConfiguration: IIIFConfiguration {
        var configuration = IIIFConfiguration(roots: Dictionary(options.roots.map { ($0.name, $0.directory) }, uniquingKeysWith: { first, _ in first }),
                                              publicURL: options.publicURL, trustedProxies: Set(options.trustedProxies), signKeys: options.signKeys)
        configuration.listings = listings
        return configuration
    }

    /// The daemon's INFO of the file the resolver opened (its descriptor passed: the daemon
    /// reads what the front checked, not whatever the path names by then).
    private static func info(_ path: String, file: OpenSource?, client: ViewerClient) async -> Result<IIIFSourceInfo, IIIFDaemonError> {
        do {
            if let file { return .success(IIIFSourceInfo(try await client.info(descriptor: file.descriptor, path: path))) }
            return .success(IIIFSourceInfo(try await client.info(path: path)))
        } catch {
            return .failure(daemonError(error))
        }
    }

    /// RENDERs the plan at `priority`: the request's `Priority: u=N` (`RequestPriority`), else
    /// `visible` (a person waits on it); cancelled with the task, which the client's going away cancels.
    private static func render(_ need: RenderNeed, priority: Priority, client: ViewerClient) async -> Result<RenderResult, IIIFDaemonError> {
        let spec = spec(need.plan, source: (need.source.width, need.source.height))
        let handle: RenderRequestHandle
        do {
            handle = try need.file.map { try client.request(descriptor: $0.descriptor, path: need.path, spec: spec, priority: priority) }
                ?? client.request(need.path, spec: spec, priority: priority)
        } catch {
            return .failure(daemonError(error))
        }
        do {
            return .success(try await withTaskCancellationHandler { try await handle.result } onCancel: { handle.cancel() })
        } catch {
            return .failure(daemonError(error))
        }
    }

    /// The daemon's spec of a IIIF plan: the pyramid's tile, or the exact size the rules
    /// computed, the turn, mirror and colours. A whole image goes as a `fit` box of the side
    /// that gives that size by the daemon's own rounding (the same as IIIF's: halves up), so
    /// that it is the rendition a native client's box makes; a `fit` into both sides could let
    /// the other side bind and come out a pixel short (1000×333 at `100,`: 99×33). A region
    /// goes `stretch`: its scaled edges round on their own, so only the exact box is sure.
    static func spec(_ plan: ImagePlan, source: (width: Int, height: Int)) -> RenditionSpec {
        let format: OutputFormat = switch plan.format {
        case .jpg: .jpeg
        case .png: .png
        case .webp: .webp
        case .gif: .gif
        case .avif: .avif
        }
        let colour: ColourMode = switch plan.quality {
        case .default, .color: .colour
        case .gray: .gray
        case .bitonal: .bitonal
        }
        var box = (width: plan.width, height: plan.height, fit: FitMode.stretch)
        if plan.tile == nil && plan.region == nil && !plan.stretch {
            if scaled(source.height, plan.width, source.width) == plan.height {
                box = (plan.width, 0, .fit)
            } else if scaled(source.width, plan.height, source.height) == plan.width {
                box = (0, plan.height, .fit)
            }
        }
        return RenditionSpec(width: UInt32(clamping: box.width), height: UInt32(clamping: box.height),
                             fit: box.fit, format: format, upscale: plan.upscale && box.fit == .fit,
                             timeMillis: plan.timeMillis, region: plan.tile == nil ? plan.region : nil, tile: plan.tile,
                             rotation: UInt16(clamping: plan.rotation), mirror: plan.mirror, colour: colour)
    }

    /// `side × target / other`, rounded halves up, as the daemon sizes the side that follows
    /// (`Renderer.outputSize`).
    private static func scaled(_ side: Int, _ target: Int, _ other: Int) -> Int {
        guard other > 0 else { return 0 }
        return max(1, (2 * side * target + other) / (2 * other))
    }

    /// What the rules make of a failed call: the daemon's ERROR by its code; anything else
    /// (no daemon, a closed connection) is the daemon being unavailable.
    private static func daemonError(_ error: any Error) -> IIIFDaemonError {
        if case ViewerClientError.server(let reply) = error, let code = reply.code {
            let failure = IIIFDaemonError.daemon(code, reply.message)
            if failure.isDaemonsFault { Log.warning("event=daemon-error code=\(code.name) message=\(Log.quote(reply.message))") }
            return failure
        }
        Log.warning("event=daemon-unavailable error=\(Log.quote("\(error)"))")
        return .unavailable("\(error)")
    }
}
