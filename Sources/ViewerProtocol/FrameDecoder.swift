/// Cuts a byte stream into frames. Feed it whatever arrived, in any split; take frames out.
///
/// ```swift
/// var decoder = FrameDecoder(maxBodyLength: 1 << 20)
/// decoder.append(bytesFromSocket)
/// while let frame = try decoder.next() { handle(frame) }
/// ```
public struct FrameDecoder: Sendable {
    public let maxBodyLength: UInt32
    private var buffer: [UInt8] = []
    private var start = 0

    public init(maxBodyLength: UInt32) {
        self.maxBodyLength = maxBodyLength
    }

    /// Bytes received but not yet returned as frames.
    public var bufferedCount: Int { buffer.count - start }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    public mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if start > 0 && start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete frame, or nil when more bytes are needed.
    /// Throws on a header that can never become valid; the stream is then unusable.
    public mutating func next() throws(ProtocolError) -> Frame? {
        guard buffer.count - start >= FrameHeader.size else { return nil }
        let header = try FrameHeader.parse(buffer[start..<(start + FrameHeader.size)])
        guard header.bodyLength <= maxBodyLength else {
            throw .frameTooLarge(length: header.bodyLength, limit: maxBodyLength)
        }
        let total = FrameHeader.size + Int(header.bodyLength)
        guard buffer.count - start >= total else { return nil }
        let body = Array(buffer[(start + FrameHeader.size)..<(start + total)])
        start += total
        // Compact once the consumed prefix dominates, so the buffer does not grow forever.
        if start > 65536 && start * 2 > buffer.count {
            buffer.removeFirst(start)
            start = 0
        }
        return Frame(type: header.type, flags: header.flags, requestID: header.requestID, body: body)
    }
}
