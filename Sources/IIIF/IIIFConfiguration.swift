/// What the IIIF front serves and how: its roots, the base of its URLs, whom it believes, its
/// keys and its limits. A value the glue (viewerd-http) fills from the command line.
///
/// ```swift
/// var configuration = IIIFConfiguration(roots: ["photos": "/srv/photos"])
/// configuration.publicURL = "https://photos.example/iiif"
/// let front = IIIFFront(configuration)
/// ```
public struct IIIFConfiguration: Sendable {
    /// NAME → absolute directory: an identifier `NAME/relative/path` names a file under DIR.
    public var roots: [String: String]
    /// The base of every URL the front writes (info.json's `id`, `Location`, the canonical
    /// `Link`): e.g. `https://photos.example/iiif`, to which `/3/{identifier}` is appended.
    /// Nil: from `X-Forwarded-Proto`/`-Host`/`-Prefix` when the peer is a trusted proxy, else
    /// from `Host` (with `http`).
    public var publicURL: String?
    /// Peers (numeric addresses, as `HTTPRequest.peer`) whose `X-Forwarded-*` fields are believed.
    public var trustedProxies: Set<String>
    /// HMAC-SHA256 keys of signed URLs; any of them verifies (for rotation). Empty: no signing.
    public var signKeys: [[UInt8]]
    /// The largest output the front asks for; larger requests are 400 naming the limit
    /// (the daemon's largest output side is 8192).
    public var maxWidth: Int
    public var maxHeight: Int
    public var maxArea: Int
    /// The tile sides info.json offers, each one of the daemon's pyramids with overlap 0
    /// (`TileAddress.sizes`: 256 or 512).
    public var tileSizes: [Int]
    /// `Cache-Control: public, max-age=` of images, info.json and redirects, in seconds.
    public var cacheMaxAge: Int
    /// The daemon's renderer version: part of every ETag, so new renderers mean new ETags.
    public var rendererVersion: String
    /// The directories an identifier without its suffix was looked up in, remembered while
    /// they do not change (`IIIFListings`); nil: each such lookup reads the directory.
    public var listings: IIIFListings?

    public init(roots: [String: String], publicURL: String? = nil, trustedProxies: Set<String> = [],
                signKeys: [[UInt8]] = [], maxWidth: Int = 8192, maxHeight: Int = 8192, maxArea: Int = 8192 * 8192,
                tileSizes: [Int] = [256], cacheMaxAge: Int = 86_400, rendererVersion: String = "") {
        self.roots = roots
        self.publicURL = publicURL
        self.trustedProxies = trustedProxies
        self.signKeys = signKeys
        self.maxWidth = maxWidth
        self.maxHeight = maxHeight
        self.maxArea = maxArea
        self.tileSizes = tileSizes
        self.cacheMaxAge = cacheMaxAge
        self.rendererVersion = rendererVersion
    }
}
