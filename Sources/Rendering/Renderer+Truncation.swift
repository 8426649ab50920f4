import CVipsShim
import MediaFormats

/// What a decode does with a source whose data ends early (`Renderer.truncation`).
enum TruncatedSource: Sendable {
    /// Fail, as a decode error does: the first attempt of every render.
    case fail
    /// Decode what is there: the second attempt, whose rendition is `sourcePartial`.
    case accept

    /// vs_thumbnail_fd's and vs_alpha_shrink_fd's `fail_on_truncated`.
    var failOnTruncated: Int32 { self == .fail ? 1 : 0 }
}

/// A source cut short (a photo still being copied): decoded as far as it goes and flagged,
/// or, where its decoder refuses it, an error that says so (docs/DECISIONS.md, "A truncated
/// source is answered, flagged, and not stored").
extension Renderer {
    /// Runs `body` with this renderer, whose decodes fail on a truncated source (libvips'
    /// fail-on=truncated, which costs a complete file nothing); when that fails (not by a
    /// cancel), once more with one that decodes what there is, whose rendition is then
    /// `sourcePartial`. libvips fails the first for truncation only, so a file that fails
    /// both ways is corrupt, and the second attempt's message is the one reported. A
    /// truncated file is decoded twice; only those do.
    func renderAcceptingTruncation(_ cancellation: RenderCancellation?,
                                   _ body: (Renderer) throws(RenderError) -> Rendition) throws(RenderError) -> Rendition {
        let first = Result { () throws(RenderError) in try body(self) }
        guard case .failure(let error) = first, case .corrupt = error, !(cancellation?.isCancelled ?? false) else {
            return try first.get()
        }
        vs_errors_reset()  // the first attempt's message is not the answer's
        var accepting = self
        accepting.truncation = .accept
        var rendition = try body(accepting)
        rendition.sourcePartial = true
        return rendition
    }

    /// A decoder's failure on a file shorter than its container declares (a WebP, HEIF or MP4
    /// still being copied: their decoders refuse what libvips' JPEG, PNG and GIF loaders
    /// decode in part) says so before the decoder's own words.
    static func namingTruncation(_ error: RenderError, of source: SourceFile) -> RenderError {
        guard let cut = DeclaredLength.shortfall(descriptor: source.descriptor, signature: source.signature) else { return error }
        let truncated = "the file is truncated (\(cut.actual) of the \(cut.declared) bytes its header declares: " +
                        "still being copied?)"
        switch error {
        case .corrupt(let path, let detail): return .corrupt(path: path, detail: truncated + "; " + detail)
        case .damagedVideo(let path, let detail): return .damagedVideo(path: path, detail: truncated + "; " + detail)
        case .damagedRaw(let path, let detail): return .damagedRaw(path: path, detail: truncated + "; " + detail)
        default: return error
        }
    }
}
