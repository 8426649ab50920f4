#if canImport(Glibc)
import Glibc
#endif
import MediaFormats
import Rendering
import RenditionStore
import ViewerProtocol

/// The daemon's sniff of an open source: its header (Rendering's `HeaderSniffer`, a parser of
/// the formats' headers), its format, its fingerprint and what its bytes already show
/// damaged, read once off the event loop; and the cost the scheduler admits its render with.
extension HeaderSniffer {
    /// What the first bytes of a source say.
    struct Sniffed: Sendable {
        /// The header, for JPEG, PNG, GIF, WebP, HEIF/AVIF, TIFF, JPEG XL and JPEG 2000; nil for other
        /// formats or a header that does not parse (a default cost).
        var header: SourceHeader?
        /// The format the bytes begin, of those viewerd reads (`ImageSignature`); nil: none.
        var format: ImageSignature?
        /// `SourceFingerprint` of the file, stored with what is rendered from it (nil: it
        /// could not be read, and nothing of it is stored).
        var fingerprint: UInt64?
        /// What the worker would answer from what these bytes already show is damaged (an
        /// MP4 whose sample tables claim more samples than the file has bytes), answered at
        /// once instead of queued as a job; nil when nothing is seen wrong.
        var refusal: RenderError?
    }

    /// Reads the start of the source once, for both questions, and its fingerprint (the
    /// start again, from the page cache, and the end).
    static func sniff(_ source: SourceFile) -> Sniffed {
        let descriptor = source.descriptor
        let fingerprint = SourceFingerprint.of(descriptor: descriptor, size: source.identity.size)
        var bytes = [UInt8](repeating: 0, count: prefixSize)
        let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard n > 0 else { return Sniffed(header: nil, format: nil, fingerprint: fingerprint) }
        let prefix = bytes[0..<n]
        var header = sniff(Array(prefix)) { offset, count in
            guard offset < UInt64(Int.max) else { return [] }
            var more = [UInt8](repeating: 0, count: count)
            let m = more.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            return m > 0 ? Array(more[0..<m]) : []
        }
        header?.jpeg2000?.codestreamBytes = UInt64(source.identity.size)  // an untiled one is read whole
        let format = ImageSignature.detect(Array(prefix), descriptor: descriptor)  // a DNG's IFD0 may lie past the prefix
        var refusal: RenderError?
        if format == .mp4 || format == .quickTime,
           let problem = SampleTables.problem(descriptor: descriptor, fileSize: source.identity.size) {
            refusal = .damagedVideo(path: source.path, detail: problem)
        }
        return Sniffed(header: header, format: format, fingerprint: fingerprint, refusal: refusal)
    }

    /// The estimated cost of rendering this source to `spec`: from its header when it was
    /// read (the model fitted to measured peaks, docs/RENDERING.md), else (SVG, PDF, a header
    /// that does not parse) from its size on disk (compressed images rarely expand more than
    /// 20-fold), so that such files are neither free nor unbounded. A file that is
    /// no image format at all (a sparse 4 GiB file of zeros) costs next to nothing.
    static func cost(of source: SourceFile, _ sniffed: Sniffed, spec: RenditionSpec) -> RenderCost {
        if let format = sniffed.format, format.format.kind == .video {
            // A video's decode is bounded by its frames, not its length, and by at least a UHD
            // frame's: the container's size is a claim the codec's own headers need not keep
            // (a track header may say 16x16 over 8K frames), and a transport stream says none.
            let uhd = SourceHeader(width: 3840, height: 2160, bands: 3, signature: format)
            let header = sniffed.header.map { $0.totalPixels > uhd.totalPixels ? $0 : uhd } ?? uhd
            return Renderer.estimateCost(header, spec: spec)
        }
        if let header = sniffed.header {
            return Renderer.estimateCost(header, spec: spec)
        }
        if let format = sniffed.format, format.format.cost == .raw {
            return Renderer.estimateRawCost(fileSize: Int(clamping: source.identity.size), spec: spec)
        }
        guard let format = sniffed.format else {
            // Not a format we read: the worker refuses it from its first bytes, at no cost.
            return RenderCost(memoryBytes: 1 << 20, costly: false)
        }
        let guess = max(UInt64(source.identity.size) * 20, 32 << 20)
        // A vector's cost is not in its size: a few hundred bytes of SVG <use> fan-out run to
        // the job timeout. Such work runs one at a time, so the other workers stay free.
        let vector = format.format.cost == .vector
        return RenderCost(memoryBytes: guess, costly: guess > 256 << 20, exclusive: vector)
    }
}
