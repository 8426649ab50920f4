import Foundation
import ViewerClient
import ViewerProtocol

struct InfoCommand: Subcommand {
    static let name = "info"
    static let abstract = "Print what files are (kind, upright size, duration, frames, format) from their headers."
    static let usage = """
        viewerctl info PATH... [--batch] [--json]

          One line per file: `PATH: KIND FORMAT WIDTHxHEIGHT`, then a video's duration and
          frames, an animation's frames, a document's pages, and for an HDR source `hdr`,
          its transfer (pq, hlg), primaries (bt2020, p3) and peak when known (`hdr hlg bt2020
          1000 nits`). KIND is photo, video, vector or
          animated; the size is upright (EXIF orientation applied). Read once by the daemon
          and then answered from its cache until the file changes.

          --batch  ask for every file in one request (LAYOUT): stored answers come at once,
                   the rest as the daemon reads them; the output is the same
          --json   one JSON array, an object per file in order: path, kind, width, height,
                   duration_ms, frames, pages, format, has_alpha, and for an HDR source
                   hdr_transfer, hdr_primaries, hdr_peak_nits (when known), placeholder (its
                   ThumbHash in base64, when the daemon has one); or path and error
                   (code, name, message) for a file that failed

          On a terminal, a last line says what a rendition carries: pixels only, 8-bit
          sRGB and upright; none of the source's EXIF, XMP, IPTC, GPS, ICC profile or text.
          This command (INFO; RENDER's source_info) is how a client gets the source's kind,
          size, duration, frames and format; its other metadata is read from the file itself.

          Exit 1 if any file failed (each failure is printed to stderr).
        """

    /// What every rendition carries, and where the rest is (tested by RenditionMetadataTests,
    /// for each output format, and against real renditions in ViewerctlTests).
    static let renditionsCarry = "renditions carry: pixels only (8-bit sRGB, upright); no EXIF, XMP, IPTC, GPS or ICC "
        + "profile (info gives the source's kind and size; read the rest from the file)"

    struct Entry: Encodable {
        struct Failure: Encodable {
            let code: UInt16
            let name: String
            let message: String
        }

        let path: String
        var kind: String?
        var width: UInt32?
        var height: UInt32?
        var duration_ms: UInt64?
        var frames: UInt32?
        var pages: UInt32?
        var format: String?
        var has_alpha: Bool?
        var hdr_transfer: String?
        var hdr_primaries: String?
        var hdr_peak_nits: UInt32?
        /// The ThumbHash, base64 (as a web page's decoder takes it).
        var placeholder: String?
        var error: Failure?
        /// `layout`'s: the file's place in the folder's order.
        var index: UInt32?

        init(path: String, info: MediaInfo) {
            self.path = path
            (kind, width, height, duration_ms) = (info.kind.name, info.width, info.height, info.durationMillis)
            (frames, pages, format, has_alpha) = (info.frames, info.pages, info.format, info.hasAlpha)
            (hdr_transfer, hdr_primaries, hdr_peak_nits) = (info.hdr?.transfer.name, info.hdr?.primariesName, info.hdr?.peakNits)
            placeholder = info.placeholder.map { Data($0).base64EncodedString() }
        }

        init(path: String, error: ErrorReply) {
            self.path = path
            self.error = Failure(code: error.rawCode, name: error.code?.name ?? "\(error.rawCode)", message: error.message)
        }
    }

    let paths: [String]
    let json: Bool
    let batch: Bool

    init(_ arguments: inout Arguments) throws(UsageError) {
        json = arguments.flag("--json")
        batch = arguments.flag("--batch")
        paths = try arguments.positionals()
        guard !paths.isEmpty else { throw UsageError("info needs at least one PATH") }
    }

    func run(_ globals: Globals) throws -> Int32 {
        let connection = try globals.connect()
        var entries: [Entry] = []
        var failed = false
        if batch {
            // One LAYOUT; each index's last item is its answer.
            var final: [UInt32: LayoutItem] = [:]
            _ = try connection.layout(LayoutRequest(paths: paths.map(absolute))) { batch in
                for item in batch.items { final[item.index] = item }
            }
            for (index, path) in paths.enumerated() {
                switch final[UInt32(index)]?.outcome {
                case .info(let info)?:
                    entries.append(Entry(path: path, info: info))
                    if !json { print("\(path): \(info.summary)") }
                case .failed(let reply)?:
                    failed = true
                    entries.append(Entry(path: path, error: reply))
                    printError("\(path): \(reply.message)")
                case .pending?, nil:
                    throw ViewerClientError.protocolViolation("the LAYOUT ended without an answer for \(path)")
                }
            }
        }
        for path in paths where !batch {
            do throws(ViewerClientError) {
                let info = try connection.info(path: absolute(path))
                entries.append(Entry(path: path, info: info))
                if !json { print("\(path): \(info.summary)") }
            } catch {
                // A file's own failure is reported and the others carry on; a daemon gone is fatal.
                guard case .server(let reply) = error else { throw error }
                failed = true
                entries.append(Entry(path: path, error: reply))
                printError("\(path): \(reply.message)")
            }
        }
        // For the reader at a terminal; a script reading the lines gets one a file, as before.
        if json {
            try printJSON(entries)
        } else if isatty(STDOUT_FILENO) != 0 && entries.contains(where: { $0.error == nil }) {
            print(Self.renditionsCarry)
        }
        return failed ? ExitCode.failure : ExitCode.success
    }
}
