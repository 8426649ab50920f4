import HTTPMessage
import ViewerProtocol

/// A window of a folder's LAYOUT as the page's JSON: one item per file, in the folder's order,
/// with what the page needs to place it and paint it before any pixels come.
///
/// ```json
/// {"root": "photos", "path": "2024", "order": "name", "offset": 0, "total": 2,
///  "folders": ["summer"],
///  "items": [
///   {"index": 0, "name": "a.jpg", "kind": "photo", "width": 4000, "height": 3000,
///    "placeholder": "k/cJDYJ4d3iHd4eHd3d4d4eHd3c=", "id": "photos%2F2024%2Fa.jpg"},
///   {"index": 1, "name": "b.mp4", "kind": "video", "width": 1920, "height": 1080,
///    "duration": 4000, "id": "photos%2F2024%2Fb.mp4", "media": "/media/photos/2024/b.mp4"},
///   {"index": 2, "name": "c.txt", "kind": "error", "error": "unsupported-format: …"}]}
/// ```
///
/// `placeholder` is the ThumbHash, base64 (absent while the daemon has none); `id` the IIIF
/// identifier; `folders` the subfolders' names, in the first window only.
public enum GalleryLayout {
    public struct Window: Sendable, Equatable {
        public var offset = 0
        public var limit = GalleryFront.defaultLimit
        public var order = LayoutOrder.name

        /// `offset=`, `limit=` (1…10000) and `order=name|modified` of the query; anything
        /// else in it is ignored, a bad value is 400.
        init(query: Substring?) throws(IIIFProblem) {
            for pair in query?.split(separator: "&") ?? [] {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                let value = parts.count == 2 ? parts[1] : ""
                switch parts[0] {
                case "offset":
                    guard let number = Int(value), number >= 0, number <= Int(UInt32.max) else { throw .badRequest("offset: \(value) is not a count") }
                    offset = number
                case "limit":
                    guard let number = Int(value), number >= 1, number <= GalleryFront.maxLimit else {
                        throw .badRequest("limit: \(value) is not 1 to \(GalleryFront.maxLimit)")
                    }
                    limit = number
                case "order":
                    switch value {
                    case "name": order = .name
                    case "modified": order = .modifiedNewestFirst
                    default: throw .badRequest("order: \(value) is not name or modified")
                    }
                default: continue
                }
            }
        }
    }

    static func json(_ value: GalleryJSON) -> HTTPResponse {
        HTTPResponse(status: 200, headers: ["Content-Type": "application/json", "Cache-Control": "no-cache"], body: value.bytes)
    }
}

/// The daemon's LAYOUT of a folder is needed.
public struct GalleryLayoutNeed: Sendable {
    let root: String
    let relative: [String]
    /// The folder's real path, which the daemon lists.
    let folder: String
    public let window: GalleryLayout.Window
    let subfolders: [String]

    public var request: LayoutRequest {
        LayoutRequest(folder: folder, order: window.order, offset: UInt32(window.offset), limit: UInt32(window.limit))
    }

    /// The JSON of the daemon's items (the last of each index: a pending one is replaced by
    /// its later item), or the error.
    public func answer(_ outcome: Result<LayoutItems, IIIFDaemonError>) -> HTTPResponse {
        let layout: LayoutItems
        switch outcome {
        case .failure(let error):
            return GalleryFront.failure(error.problem == .notFound ? GalleryPath.noFolder : error.problem)
        case .success(let items): layout = items
        }
        var latest: [UInt32: LayoutItem] = [:]
        for item in layout.items { latest[item.index] = item }
        let items = latest.values.sorted { $0.index < $1.index }.map(json)
        return GalleryLayout.json(.object([
            ("root", .string(root)), ("path", .string(relative.joined(separator: "/"))), ("order", .string(window.order.name)),
            ("offset", .int(window.offset)), ("total", .int(Int(layout.total))),
            ("folders", .array(subfolders.map { .string($0) })), ("items", .array(items)),
        ]))
    }

    private func json(_ item: LayoutItem) -> GalleryJSON {
        let name = item.path.map { String($0.split(separator: "/").last ?? "") } ?? ""
        let location = [root] + relative + [name]
        var fields: [(String, GalleryJSON)] = [("index", .int(Int(item.index))), ("name", .string(name))]
        switch item.outcome {
        case .info(let info):
            fields += [("kind", .string(info.kind.name)), ("width", .int(Int(info.width))), ("height", .int(Int(info.height)))]
            if info.durationMillis > 0 { fields.append(("duration", .int(Int(info.durationMillis)))) }
            if let placeholder = info.placeholder { fields.append(("placeholder", .string(Base64.encode(placeholder)))) }
            fields.append(("id", .string(GalleryPath.encode(location.joined(separator: "/")))))
            if info.kind == .video || info.kind == .animated {
                fields.append(("media", .string("/media/" + location.map(GalleryPath.encode).joined(separator: "/"))))
            }
        case .failed(let error):
            fields += [("kind", .string("error")), ("error", .string("\(error.code?.name ?? "error"): \(error.message)"))]
        case .pending:
            fields += [("kind", .string("pending"))]
        }
        return .object(fields)
    }
}

/// Compact JSON (the layout of 10,000 items is about 1.5 MB so), keys in the order given.
indirect enum GalleryJSON {
    case string(String)
    case int(Int)
    case array([GalleryJSON])
    case object([(String, GalleryJSON)])

    var bytes: [UInt8] {
        var out: [UInt8] = []
        write(&out)
        out.append(0x0A)
        return out
    }

    private func write(_ out: inout [UInt8]) {
        switch self {
        case .string(let text):
            out.append(0x22)
            for byte in text.utf8 {
                switch byte {
                case 0x22, 0x5C: out += [0x5C, byte]
                case 0..<0x20: out += Array("\\u00".utf8) + Array([byte].hex.utf8)
                default: out.append(byte)
                }
            }
            out.append(0x22)
        case .int(let value): out += Array(String(value).utf8)
        case .array(let items):
            out.append(0x5B)
            for (i, item) in items.enumerated() {
                if i > 0 { out.append(0x2C) }
                item.write(&out)
            }
            out.append(0x5D)
        case .object(let fields):
            out.append(0x7B)
            for (i, (name, value)) in fields.enumerated() {
                if i > 0 { out.append(0x2C) }
                GalleryJSON.string(name).write(&out)
                out.append(0x3A)
                value.write(&out)
            }
            out.append(0x7D)
        }
    }
}

/// RFC 4648 base64 with padding: a ThumbHash for the page's `atob`.
enum Base64 {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        for start in stride(from: 0, to: bytes.count, by: 3) {
            let chunk = bytes[start..<min(start + 3, bytes.count)]
            let value = chunk.enumerated().reduce(UInt32(0)) { $0 | UInt32($1.element) << (16 - 8 * UInt32($1.offset)) }
            for i in 0..<4 {
                out.append(i <= chunk.count ? alphabet[Int(value >> (18 - 6 * UInt32(i)) & 63)] : 0x3D)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
