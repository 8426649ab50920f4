/// Client → server: the media info of many files at once, for laying out a whole grid or
/// pager window in one round trip (LAYOUT, PROTOCOL.md). Answered by a stream of
/// `LayoutItems` and then an ACK whose count is the items answered (or CANCELLED, or ERROR).
///
/// ```swift
/// let request = LayoutRequest(folder: "/pictures/2026", order: .modifiedNewestFirst, limit: 500)
/// for try await item in client.layout(request) { grid.place(item) }
/// ```
public struct LayoutRequest: Sendable, Equatable {
    /// What to lay out: named files, or the files of a folder in an order.
    public enum Source: Sendable, Equatable {
        /// Absolute paths; each item's index is its place in this list.
        case paths([String])
        /// An absolute directory's files (not its subfolders, not names starting with `.`),
        /// in `order`; each item's index is its place in that order, from `offset`.
        case folder(String, order: LayoutOrder)
    }

    public var source: Source
    /// Folder mode: files to skip at the start of the order (a window further down).
    public var offset: UInt32
    /// Items at most; 0: as many as the server allows (`LayoutRequest.maxItems` in viewerd).
    public var limit: UInt32

    /// The most items one LAYOUT answers in viewerd (more paths are `invalid-argument`; a
    /// folder's window is cut there).
    public static let maxItems: UInt32 = 10_000

    public init(paths: [String]) {
        (source, offset, limit) = (.paths(paths), 0, 0)
    }

    public init(folder: String, order: LayoutOrder = .name, offset: UInt32 = 0, limit: UInt32 = 0) {
        (source, self.offset, self.limit) = (.folder(folder, order: order), offset, limit)
    }
}

/// The order of a folder's files in a LAYOUT.
public enum LayoutOrder: UInt8, Sendable, CaseIterable {
    /// By name, byte by byte of its UTF-8 (so `B` before `a`).
    case name = 0
    /// Newest modification time first; the same time by name.
    case modifiedNewestFirst = 1

    /// The name PROTOCOL.md gives the value.
    public var name: String { self == .name ? "name" : "modified" }
}

/// One file of a LAYOUT: its media info (with its placeholder when there is one), why it
/// has none, or that it is still being read. An index answered `infoPending` or
/// `placeholderPending` comes again in a later frame, and the later item replaces it.
public struct LayoutItem: Sendable, Equatable {
    /// What is known of the file so far.
    public enum Outcome: Sendable, Equatable {
        case info(MediaInfo)
        /// The file could not be opened or read, as INFO would have failed.
        case failed(ErrorReply)
        /// Its header is being read: the same index comes again with its info or error.
        case pending
    }

    /// Its place in the request's list, or in the folder's order counted from 0 (the offset
    /// not subtracted: the first item of a window at offset 500 has index 500).
    public var index: UInt32
    /// Folder mode: the file's absolute path; nil for a list of paths (the client has them).
    public var path: String?
    public var outcome: Outcome
    /// The info has no placeholder yet and the server is making one: the index comes again.
    public var placeholderPending: Bool

    public init(index: UInt32, path: String? = nil, outcome: Outcome, placeholderPending: Bool = false) {
        self.index = index
        self.path = path
        self.outcome = outcome
        self.placeholderPending = placeholderPending
    }

    /// The media info, when known.
    public var info: MediaInfo? {
        if case .info(let info) = outcome { return info }
        return nil
    }

    /// Whether a later item of the same index will follow.
    public var isFinal: Bool {
        if case .pending = outcome { return false }
        return !placeholderPending
    }
}

/// Server → client: some items of a LAYOUT (LAYOUT_ITEMS, not terminal).
public struct LayoutItems: Sendable, Equatable {
    /// How many files the request covers: the paths sent, or the folder's files in all (not
    /// only the window), for sizing a scroll bar.
    public var total: UInt32
    public var items: [LayoutItem]

    public init(total: UInt32, items: [LayoutItem]) {
        self.total = total
        self.items = items
    }
}

extension LayoutItem {
    /// One item's packed form inside LAYOUT_ITEMS' `items`: a u32 length, then its fields.
    /// `infoBody` is an INFO_REPLY body as stored (the daemon copies it without decoding).
    public static func pack(index: UInt32, path: String?, infoBody: UnsafeRawBufferPointer?, error: ErrorReply?,
                            infoPending: Bool, placeholderPending: Bool, into out: inout [UInt8]) {
        var w = FieldWriter()
        w.put(Tag.LayoutItem.index, index)
        if let path { w.put(Tag.LayoutItem.path, path) }
        if let infoBody { w.put(Tag.LayoutItem.info, bytes: Array(infoBody)) }
        if let error {
            w.put(Tag.LayoutItem.errorCode, error.rawCode)
            w.put(Tag.LayoutItem.errorMessage, error.message)
        }
        if infoPending { w.put(Tag.LayoutItem.infoPending, true) }
        if placeholderPending { w.put(Tag.LayoutItem.placeholderPending, true) }
        out.appendLE(UInt32(w.bytes.count))
        out.append(contentsOf: w.bytes)
    }

    /// This item packed (`pack`).
    public func packed(into out: inout [UInt8]) {
        let error: ErrorReply? = if case .failed(let e) = outcome { e } else { nil }
        let body: [UInt8]? = info?.body()
        let pending: Bool = if case .pending = outcome { true } else { false }
        if let body {
            body.withUnsafeBytes { raw in
                Self.pack(index: index, path: path, infoBody: raw, error: nil, infoPending: false,
                          placeholderPending: placeholderPending, into: &out)
            }
        } else {
            Self.pack(index: index, path: path, infoBody: nil, error: error, infoPending: pending,
                      placeholderPending: placeholderPending, into: &out)
        }
    }

    /// Reads one item's fields: exactly one of info, an error code, or `info_pending`.
    init(fields body: ArraySlice<UInt8>) throws(ProtocolError) {
        let r = try FieldReader(Array(body), type: .layoutItems)
        let index: UInt32 = try r.required(Tag.LayoutItem.index)
        let path = try r.string(Tag.LayoutItem.path)
        let info = try r.bytes(Tag.LayoutItem.info).map { (bytes) throws(ProtocolError) in try MediaInfo(body: bytes) }
        let code: UInt16? = try r.integer(Tag.LayoutItem.errorCode)
        let pending = try r.bool(Tag.LayoutItem.infoPending) ?? false
        guard [info != nil, code != nil, pending].filter({ $0 }).count == 1 else {
            throw .invalidValue(field: "layout item \(index)", detail: "needs exactly one of info, error_code and info_pending")
        }
        let outcome: Outcome = if let info { .info(info) }
            else if let code { .failed(ErrorReply(rawCode: code, message: try r.string(Tag.LayoutItem.errorMessage) ?? "")) }
            else { .pending }
        self.init(index: index, path: path, outcome: outcome,
                  placeholderPending: try r.bool(Tag.LayoutItem.placeholderPending) ?? false)
    }
}

extension LayoutItems {
    /// Decodes LAYOUT_ITEMS' packed `items` (`LayoutItem.pack`).
    static func unpack(_ list: ArraySlice<UInt8>) throws(ProtocolError) -> [LayoutItem] {
        var items: [LayoutItem] = []
        var i = list.startIndex
        while i < list.endIndex {
            guard list.endIndex - i >= 4 else { throw .truncatedField(tag: Tag.LayoutItems.items) }
            let length = Int(UInt32(le: list, at: i))
            guard length <= list.endIndex - i - 4 else { throw .truncatedField(tag: Tag.LayoutItems.items) }
            items.append(try LayoutItem(fields: list[(i + 4)..<(i + 4 + length)]))
            i += 4 + length
        }
        return items
    }

    /// A LAYOUT_ITEMS body around items already packed (`LayoutItem.pack`).
    public static func body(total: UInt32, packedItems: [UInt8]) -> [UInt8] {
        var w = FieldWriter()
        w.put(Tag.LayoutItems.total, total)
        w.put(Tag.LayoutItems.items, bytes: packedItems)
        return w.bytes
    }
}
