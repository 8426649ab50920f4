import HTTPMessage
import ViewerProtocol

/// What the gallery serves and from where.
public struct GalleryConfiguration: Sendable {
    /// NAME → directory, as the IIIF front's roots.
    public var roots: [String: String]
    /// The web directory (`--web-dir`): the page's files are its `gallery/`.
    public var webDirectory: String

    public init(roots: [String: String], webDirectory: String) {
        self.roots = roots
        self.webDirectory = webDirectory
    }
}

/// The web gallery's rules, passive (as `IIIFFront`): a request under `/gallery` in, the answer
/// or the daemon's LAYOUT to ask out. Its file-system reads are the web directory's files and
/// the folders' real paths.
///
/// - `/gallery/` and `/gallery/ROOT/PATH…` (a folder): the one page, `gallery/index.html`,
///   which reads its folder from `location`; an unknown folder is 404.
/// - `/gallery/assets/NAME`: the page's files from the web directory, by suffix (html, css,
///   js, json, svg, png, ico), with an ETag and `no-cache`; nothing else and no listing.
/// - `/gallery/api/roots`: `{"roots": [names]}`.
/// - `/gallery/api/layout/ROOT/PATH…?offset=&limit=&order=name|modified`: a window of the
///   folder's LAYOUT as JSON (`GalleryLayout`).
///
/// A root named `api` or `assets` is served as IIIF and media but has no album page.
public struct GalleryFront: Sendable {
    public let configuration: GalleryConfiguration

    public init(_ configuration: GalleryConfiguration) {
        self.configuration = configuration
    }

    /// The most items a layout window may ask (the daemon's own limit of one LAYOUT).
    public static let maxLimit = Int(LayoutRequest.maxItems)
    public static let defaultLimit = 1000

    public func handle(_ request: HTTPRequest) -> GalleryStep {
        do throws(IIIFProblem) {
            return try route(request)
        } catch {
            return .respond(Self.failure(error))
        }
    }

    private func route(_ request: HTTPRequest) throws(IIIFProblem) -> GalleryStep {
        guard request.method == "GET" || request.method == "HEAD" else {
            throw IIIFProblem(405, "method \(request.method) is not allowed: GET or HEAD")
        }
        let path = request.path
        if path == "/gallery" {
            return .respond(.text(301, "see /gallery/", headers: ["Location": "/gallery/", "Cache-Control": "no-cache"]))
        }
        guard path.hasPrefix("/gallery/") else { throw IIIFProblem(404, "not found") }
        let segments = try GalleryPath.segments(path.dropFirst("/gallery/".count))
        switch segments.first {
        case nil:
            return .respond(try page(request))
        case "assets":
            return .respond(try GalleryFiles.asset(Array(segments.dropFirst()), web: configuration.webDirectory, request.headers))
        case "api":
            return try api(Array(segments.dropFirst()), request)
        default:
            _ = try folder(segments)
            return .respond(try page(request))
        }
    }

    private func page(_ request: HTTPRequest) throws(IIIFProblem) -> HTTPResponse {
        try GalleryFiles.asset(["index.html"], web: configuration.webDirectory, request.headers)
    }

    private func api(_ segments: [String], _ request: HTTPRequest) throws(IIIFProblem) -> GalleryStep {
        switch segments.first {
        case "roots" where segments.count == 1:
            let names = configuration.roots.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            return .respond(GalleryLayout.json(GalleryJSON.object([("roots", .array(names.map { .string($0) }))])))
        case "layout" where segments.count >= 2:
            let location = Array(segments.dropFirst())
            let real = try folder(location)
            let window = try GalleryLayout.Window(query: request.query)
            return .layout(GalleryLayoutNeed(root: location[0], relative: Array(location.dropFirst()), folder: real, window: window,
                                             subfolders: window.offset == 0 ? GalleryPath.subfolders(of: real) : []))
        default:
            throw IIIFProblem(404, "not found: the API is /gallery/api/roots and /gallery/api/layout/ROOT/PATH")
        }
    }

    /// The real path of the folder `location` (ROOT, then the path under it) names.
    private func folder(_ location: [String]) throws(IIIFProblem) -> String {
        guard let root = configuration.roots[location[0]] else { throw GalleryPath.noFolder }
        return try GalleryPath.folder(Array(location.dropFirst()), under: root)
    }

    static func failure(_ problem: IIIFProblem) -> HTTPResponse {
        .text(problem.status, problem.reason, headers: ["Cache-Control": "no-store"])
    }
}

/// What a gallery request leads to next.
public enum GalleryStep: Sendable {
    case respond(HTTPResponse)
    /// Ask the daemon `need.request` (a folder's LAYOUT), then `need.answer(_:)`.
    case layout(GalleryLayoutNeed)

    public var response: HTTPResponse? {
        if case .respond(let response) = self { return response }
        return nil
    }
}
