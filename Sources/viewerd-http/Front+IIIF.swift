import HTTPMessage
import HTTPServer
import IIIF
import ViewerClient
import ViewerProtocol

/// The IIIF rules (`Sources/IIIF`, passive) run against the daemon: each `IIIFStep` the rules
/// return is either the answer, or a call to make (INFO of the resolved file, then RENDER of
/// the plan) whose outcome the rules turn into the next step. The render is the daemon's
/// ordinary RENDER, so a tile a browser asks is the stored rendition a native pager's tile is,
/// and a client that goes away cancels it (`HTTPReply.onClientGone`: the daemon drops the job
/// if no other client waits on it).
extension Front {
    func serveIIIF(_ request: HTTPRequest, reply: HTTPReply) {
        let client = client, metrics = metrics, configuration = iiifConfiguration
        let task = Task {
            // The daemon's release is part of every ETag (another release may render other
            // bytes); without a daemon there is nothing to serve but a 503.
            let release: String
            do {
                release = try await client.server.serverVersion
            } catch {
                reply.send(.text(503, "the daemon is unavailable: \(error)",
                                 headers: ["Retry-After": "1", "Cache-Control": "no-store", "Access-Control-Allow-Origin": "*"]))
                return
            }
            var configuration = configuration
            configuration.rendererVersion = "viewerd " + release
            var step = IIIFFront(configuration).handle(request)
            while !Task.isCancelled {
                switch step {
                case .respond(let response):
                    reply.send(response)
                    return
                case .info(let need):
                    step = need.answer(await Self.info(need.path, client: client))
                case .render(let need):
                    let rendered = await Self.render(need, client: client)
                    if case .success(let result) = rendered { metrics.recordRendition(fromCache: result.fromCache) }
                    reply.send(need.answer(rendered.map { IIIFRendered(bytes: $0.bytes) }))
                    return
                }
            }
        }
        reply.onClientGone { task.cancel() }
    }

    /// The rules' configuration from the command line (the renderer version is the daemon's,
    /// added per request).
    var iiifConfiguration: IIIFConfiguration {
        IIIFConfiguration(roots: Dictionary(options.roots.map { ($0.name, $0.directory) }, uniquingKeysWith: { first, _ in first }),
                          publicURL: options.publicURL, trustedProxies: Set(options.trustedProxies), signKeys: options.signKeys)
    }

    private static func info(_ path: String, client: ViewerClient) async -> Result<IIIFSourceInfo, IIIFDaemonError> {
        do {
            return .success(IIIFSourceInfo(try await client.info(path: path)))
        } catch {
            return .failure(daemonError(error))
        }
    }

    /// RENDERs the plan at `visible` priority (a person waits on every HTTP request); cancelled
    /// with the task, which the client's going away cancels.
    private static func render(_ need: RenderNeed, client: ViewerClient) async -> Result<RenderResult, IIIFDaemonError> {
        let handle = client.request(need.path, spec: spec(need.plan), priority: .visible)
        do {
            return .success(try await withTaskCancellationHandler { try await handle.result } onCancel: { handle.cancel() })
        } catch {
            return .failure(daemonError(error))
        }
    }

    /// The daemon's spec of a IIIF plan: its exact size (`stretch` where IIIF changes the
    /// aspect ratio), the region or the pyramid's tile, the turn, mirror and colours.
    static func spec(_ plan: ImagePlan) -> RenditionSpec {
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
        return RenditionSpec(width: UInt32(clamping: plan.width), height: UInt32(clamping: plan.height),
                             fit: plan.stretch ? .stretch : .fit, format: format, upscale: plan.upscale,
                             timeMillis: plan.timeMillis, region: plan.tile == nil ? plan.region : nil, tile: plan.tile,
                             rotation: UInt16(clamping: plan.rotation), mirror: plan.mirror, colour: colour)
    }

    /// What the rules make of a failed call: the daemon's ERROR by its code; anything else
    /// (no daemon, a closed connection) is the daemon being unavailable.
    private static func daemonError(_ error: any Error) -> IIIFDaemonError {
        if case ViewerClientError.server(let reply) = error, let code = reply.code {
            return .daemon(code, reply.message)
        }
        return .unavailable("\(error)")
    }
}
