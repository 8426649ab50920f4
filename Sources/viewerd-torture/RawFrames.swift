import ViewerProtocol

/// A frame header by hand, for frames the encoder would never write.
func rawHeader(type: UInt8, flags: UInt16 = 0, id: UInt32, length: UInt32, magic: [UInt8] = FrameHeader.magic,
               version: UInt8 = 1) -> [UInt8] {
    var out = magic
    out.append(version)
    out.append(type)
    withUnsafeBytes(of: flags.littleEndian) { out.append(contentsOf: $0) }
    withUnsafeBytes(of: id.littleEndian) { out.append(contentsOf: $0) }
    withUnsafeBytes(of: length.littleEndian) { out.append(contentsOf: $0) }
    return out
}

extension Message {
    /// The error code name of an ERROR, "result" for a RESULT, else the type's name.
    var outcome: String {
        switch self {
        case .result: "result"
        case .error(let e): e.code?.name ?? "code-\(e.rawCode)"
        case .cancelled: "cancelled"
        case .preview: "preview"
        case .pong: "pong"
        case .ack: "ack"
        case .statsReply: "stats"
        default: "\(type)"
        }
    }
}
