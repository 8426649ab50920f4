import Foundation
import HTTPMessage
import HTTPServer
import IIIF
import ViewerClient
import ViewerLog
import ViewerProtocol

/// Where a request goes, by its path alone (the metrics' and the access log's `route`).
enum Route: String, Sendable {
    case healthz, metrics, iiif, gallery, media
    /// Anything else: 404.
    case other

    init(path: Substring) {
        switch path {
        case "/healthz": self = .healthz
        case "/metrics": self = .metrics
        case _ where path.hasPrefix("/iiif/"): self = .iiif
        case _ where path == "/gallery" || path.hasPrefix("/gallery/"): self = .gallery
        case _ where path.hasPrefix("/media/"): self = .media
        default: self = .other
        }
    }
}

/// viewerd-http's handler: routes each request, answers `/healthz` and `/metrics` itself and
/// hands `/iiif/…` to `serveIIIF` (Front+IIIF.swift). The daemon is reached through one
/// `ViewerClient`, which opens a new connection at the next call after the daemon restarted.
final class Front: Sendable {
    let options: FrontOptions
    let client: ViewerClient
    let metrics = Metrics()
    let accessLog: AccessLog?
    /// The answers, INFO and release the front remembers (`--memory-cache`).
    let memory: IIIFMemory
    /// The directories identifiers without a suffix were looked up in.
    let listings = IIIFListings()

    /// How long /healthz and /metrics wait for the daemon.
    static let daemonTimeout: Duration = .seconds(2)

    init(options: FrontOptions, client: ViewerClient, accessLog: AccessLog?) {
        self.options = options
        self.client = client
        self.accessLog = accessLog
        self.memory = IIIFMemory(responseBytes: options.memoryCacheBytes)
    }

    func serve(_ request: HTTPRequest, reply: HTTPReply) {
        switch Route(path: request.path) {
        case .healthz: serveHealth(reply: reply)
        case .metrics: serveMetrics(reply: reply)
        case .iiif: serveIIIF(request, reply: reply)
        case .gallery: serveGallery(request, reply: reply)
        case .media: serveMedia(request, reply: reply)
        case .other: reply.send(.text(404, "not found: the routes are /iiif/3/…, /iiif/2/…, /gallery/, /media/…, /metrics and /healthz",
                                      headers: Admission.errorHeaders()))
        }
    }

    /// Every request's end (the server's completion callback): the metrics and the access log.
    func completed(_ completion: HTTPServer.Completion) {
        let route = Route(path: completion.request.path).rawValue
        metrics.record(route: route, status: completion.status, bytes: completion.bytes, duration: completion.duration)
        accessLog?.record(completion, route: route)
    }

    /// 200 "ok" when the daemon answers PING, else 503 naming why.
    func serveHealth(reply: HTTPReply) {
        let client = client
        let task = Task {
            do {
                _ = try await Self.withTimeout(Self.daemonTimeout) { try await client.ping() }
                reply.send(.text(200, "ok", headers: ["Cache-Control": "no-store"]))
            } catch {
                reply.send(.text(503, "daemon unavailable: \(error)", headers: ["Cache-Control": "no-store"]))
            }
        }
        reply.onClientGone { task.cancel() }
    }

    /// The OpenMetrics text, the daemon's STATS included when it answers in time.
    func serveMetrics(reply: HTTPReply) {
        let client = client
        let metrics = metrics, memory = memory
        let task = Task {
            let stats = try? await Self.withTimeout(Self.daemonTimeout) { try await client.stats() }
            reply.send(HTTPResponse(status: 200, headers: ["Content-Type": "application/openmetrics-text; version=1.0.0; charset=utf-8",
                                                           "Cache-Control": "no-store"],
                                    body: Array(metrics.text(daemon: stats, memory: memory.responseUsage).utf8)))
        }
        reply.onClientGone { task.cancel() }
    }

    struct TimedOut: Error, CustomStringConvertible {
        var description: String { "no answer within \(Front.daemonTimeout)" }
    }

    /// `body`'s result, or `TimedOut` after `timeout` (the call is cancelled then).
    static func withTimeout<T: Sendable>(_ timeout: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
        try await withThrowingTaskGroup(of: T.self) { group in
            group.addTask { try await body() }
            group.addTask {
                try await Task.sleep(for: timeout)
                throw TimedOut()
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }
}
