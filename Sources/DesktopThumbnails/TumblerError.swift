/// The error codes of the Thumbnailer1 `Error` signal, as Tumbler numbers them
/// (`TumblerErrorEnum` in tumbler-error.h): desktop clients compare against these.
public enum TumblerError: Int32, Sendable {
    /// No thumbnailer for the file's type, or a URI scheme other than `file`.
    case unsupported = 0
    /// The thumbnailer could not be reached (here: the daemon).
    case connectionError = 1
    /// The file is not what its type says (corrupt).
    case invalidFormat = 2
    /// The file lies inside the thumbnail cache.
    case isThumbnail = 3
    /// The thumbnail could not be written.
    case saveFailed = 4
    /// The flavor is none of normal, large, x-large, xx-large.
    case unsupportedFlavor = 5
    /// Nothing could be made of the file (too large, failed before).
    case noContent = 6
    /// The service is stopping.
    case shuttingDown = 7
    /// An error of another kind (a file that cannot be read: missing, not permitted).
    case otherErrorDomain = 8
}
