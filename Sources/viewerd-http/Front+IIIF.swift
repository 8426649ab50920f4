import HTTPMessage
import HTTPServer

extension Front {
    /// THE SEAM for issue 33's IIIF rules (Sources/IIIF, built apart): the lead wires them here
    /// at the merge (URL → request, the daemon's calls through `client`, `metrics.recordRendition`,
    /// info.json from `options.roots`, `options.publicURL`, `options.trustedProxies`,
    /// `options.signKeys`). Until then every /iiif/ request is 503.
    func serveIIIF(_ request: HTTPRequest, reply: HTTPReply) {
        reply.send(.text(503, "IIIF front not wired yet"))
    }
}
