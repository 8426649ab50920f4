import HTTPMessage
import ViewerProtocol

/// The IIIF Image API front's rules, passive: an `HTTPRequest` in, the next step out. No
/// sockets, no daemon calls, no threads; the resolver's stat of the source is its only I/O.
///
/// A request's life: `handle` answers at once (a 4xx, a redirect, a 304 from the source's
/// identity and the ETag the client names) or asks the daemon's INFO of the resolved file (`.info`); that answer gives
/// info.json, or an `ImagePlan` to RENDER (`.render`); the render's answer gives the image.
/// Every step ends in exactly one `HTTPResponse`, and every response carries
/// `Access-Control-Allow-Origin: *`; errors are short text with `Cache-Control: no-store`.
///
/// ```swift
/// switch front.handle(request) {
/// case .respond(let response): send(response)
/// case .info(let need): continueWith(need.answer(daemonInfo(need.path)))
/// case .render(let need): send(need.answer(daemonRender(need.path, need.plan)))
/// }
/// ```
public struct IIIFFront: Sendable {
    public let configuration: IIIFConfiguration
    let resolver: IIIFResolver
    let signing: IIIFSigning?

    public init(_ configuration: IIIFConfiguration) {
        self.configuration = configuration
        self.resolver = IIIFResolver(roots: configuration.roots, listings: configuration.listings)
        self.signing = configuration.signKeys.isEmpty ? nil : IIIFSigning(keys: configuration.signKeys)
    }

    /// The first step of `request`.
    public func handle(_ request: HTTPRequest) -> IIIFStep {
        do throws(IIIFProblem) {
            return try route(request)
        } catch {
            return .respond(Self.failure(error))
        }
    }

    private func route(_ request: HTTPRequest) throws(IIIFProblem) -> IIIFStep {
        switch request.method {
        case "GET", "HEAD": break
        case "OPTIONS": return .respond(Self.preflight())
        default:
            throw IIIFProblem(405, "method \(request.method) is not allowed: GET, HEAD or OPTIONS")
        }
        var path = request.path
        // The absolute form (a proxy's) names the same path.
        if path.hasPrefix("http://") || path.hasPrefix("https://") {
            let afterScheme = path[path.index(path.firstIndex(of: ":")!, offsetBy: 3)...]
            path = afterScheme.firstIndex(of: "/").map { afterScheme[$0...] } ?? "/"
        }
        guard path.hasPrefix("/iiif/") else { throw IIIFProblem(404, "not found: IIIF URLs start /iiif/3/ or /iiif/2/") }
        var segments = path.dropFirst(6).split(separator: "/", omittingEmptySubsequences: false)
        guard let version = IIIFVersion(rawValue: String(segments.removeFirst())) else {
            throw IIIFProblem(404, "not found: IIIF URLs start /iiif/3/ or /iiif/2/")
        }
        var signature: String?
        if signing != nil {
            guard !segments.isEmpty else { throw IIIFProblem(403, "signature: this URL is not signed") }
            signature = String(segments.removeFirst())
        }
        guard let rawIdentifier = segments.first.map(String.init), !rawIdentifier.isEmpty else {
            throw IIIFProblem(404, "not found: the URL names no identifier")
        }
        let identifier = try IIIFURL.decodeIdentifier(rawIdentifier)
        if let signing, let signature, !signing.verifies(signature, identifier: identifier) {
            throw IIIFProblem(403, "signature: not a valid signature of this identifier")
        }
        let parameters = segments.dropFirst()
        let base = try IIIFURL.base(of: request, version: version, configuration: configuration)
            + "/" + (signature.map { $0 + "/" } ?? "") + rawIdentifier

        if parameters.isEmpty || parameters == [""] {
            _ = try resolver.resolve(identifier)
            var headers = Self.commonHeaders()
            headers.set("Location", base + "/info.json")
            headers.set("Cache-Control", "public, max-age=\(configuration.cacheMaxAge)")
            return .respond(.text(303, "see \(base)/info.json", headers: headers))
        }
        if parameters.count == 1 && parameters.first == "info.json" {
            let source = try resolver.resolve(identifier)
            let linkedData = IIIFURL.prefersLinkedData(request.headers["Accept"])
            let exchange = IIIFExchange(configuration: configuration, version: version, base: base, source: source,
                                        kind: .info(linkedData: linkedData), requestHeaders: request.headers)
            return exchange.start()
        }
        guard parameters.count == 4 else {
            throw IIIFProblem(404, "not found: an image URL is {identifier}/{region}/{size}/{rotation}/{quality}.{format}, its identifier's slashes written %2F")
        }
        var values: [String] = []
        for part in parameters { values.append(try IIIFURL.decode(part, what: "a parameter")) }
        let image = try IIIFImageRequest(version: version, region: values[0], size: values[1], rotation: values[2],
                                         qualityAndFormat: values[3], timeMillis: try IIIFURL.time(request.query))
        let source = try resolver.resolve(identifier)
        let exchange = IIIFExchange(configuration: configuration, version: version, base: base, source: source, kind: .image(image),
                                    requestHeaders: request.headers)
        return exchange.start()
    }

    /// CORS on everything.
    static func commonHeaders() -> HTTPHeaders {
        var headers = HTTPHeaders()
        headers.append("Access-Control-Allow-Origin", "*")
        return headers
    }

    static func failure(_ problem: IIIFProblem) -> HTTPResponse {
        var headers = commonHeaders()
        headers.append("Cache-Control", "no-store")
        if problem.status == 405 { headers.append("Allow", "GET, HEAD, OPTIONS") }
        if problem.status == 503 { headers.append("Retry-After", "1") }
        return .text(problem.status, problem.reason, headers: headers)
    }

    static func preflight() -> HTTPResponse {
        var headers = commonHeaders()
        headers.append("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS")
        headers.append("Access-Control-Allow-Headers", HTTPHeaders.corsRequestHeaders)
        headers.append("Access-Control-Max-Age", "86400")
        headers.append("Allow", "GET, HEAD, OPTIONS")
        return HTTPResponse(status: 204, headers: headers)
    }
}

/// What a request to the front leads to next.
public enum IIIFStep: Sendable {
    /// Send this; the request is answered.
    case respond(HTTPResponse)
    /// Ask the daemon INFO of `need.path`, then `need.answer(_:)`.
    case info(InfoNeed)
    /// Ask the daemon to RENDER `need.plan` of `need.path`, then `need.answer(_:)`.
    case render(RenderNeed)

    /// The response, when this step is one.
    public var response: HTTPResponse? {
        if case .respond(let response) = self { return response }
        return nil
    }
}

/// The daemon's INFO of a resolved source is needed.
public struct InfoNeed: Sendable {
    /// Absolute, resolved under a root.
    public var path: String { exchange.source.path }
    /// The source's identity when the front resolved it.
    public var identity: FileIdentity { exchange.source.identity }
    /// What an answer to this request can be kept under (`IIIFMemory`): the ETag that names
    /// its bytes and the base URI its headers carry.
    public var answerKey: String { exchange.answerKey }
    /// The file, open beneath its root: what the daemon is to read.
    public var file: OpenSource? { exchange.source.file }
    let exchange: IIIFExchange

    /// The answer when `kept` is the 200 the front keeps under `answerKey`: a kept answer
    /// proves the request good for the image, so its conditions are evaluated (a 304), else
    /// `kept` itself.
    public func answer(kept: HTTPResponse) -> HTTPResponse {
        guard exchange.isNotModified, case .respond(let notModified) = exchange.notModified else { return kept }
        return notModified
    }

    /// The next step: info.json, the image's plan to render, or the error.
    public func answer(_ info: Result<IIIFSourceInfo, IIIFDaemonError>) -> IIIFStep {
        switch info {
        case .failure(let error): return .respond(IIIFFront.failure(error.problem))
        case .success(let info): return exchange.proceed(with: info)
        }
    }
}

/// The daemon's rendition of a plan is needed.
public struct RenderNeed: Sendable {
    public var path: String { exchange.source.path }
    public let plan: ImagePlan
    /// INFO's answer, which the plan was made from.
    public let source: IIIFSourceInfo
    /// As `InfoNeed.answerKey`.
    public var answerKey: String { exchange.answerKey }
    /// As `InfoNeed.file`.
    public var file: OpenSource? { exchange.source.file }
    let exchange: IIIFExchange
    let canonical: String

    /// The image, or the error.
    public func answer(_ rendered: Result<IIIFRendered, IIIFDaemonError>) -> HTTPResponse {
        switch rendered {
        case .failure(let error): return IIIFFront.failure(error.problem)
        case .success(let rendered):
            var headers = exchange.cacheHeaders()
            headers.set("Content-Type", plan.format.mediaType)
            headers.set("Link", "<\(canonical)>;rel=\"canonical\", <\(exchange.version.profileURI)>;rel=\"profile\"")
            headers.set("Access-Control-Expose-Headers", "Link, ETag")
            return HTTPResponse(status: 200, headers: headers, body: rendered.bytes)
        }
    }
}
