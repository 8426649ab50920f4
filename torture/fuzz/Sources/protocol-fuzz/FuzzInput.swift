import ViewerProtocol

/// One fuzz input and the checks it must pass, shared by the libFuzzer target
/// (ProtocolFuzz.swift, which traps on a problem) and by
/// Tests/ViewerProtocolTests/FuzzRegressionTests.swift (through a symbolic link; it records
/// an issue), so that a kept crash input is replayed exactly as the fuzzer ran it.
///
/// Byte 0 steers (how the stream is split into reads, which body limit the decoder has), the
/// rest is a byte stream from a peer. Every frame the decoder returns is parsed as a message;
/// every message that parses must encode to a frame that parses back to the same message.
enum FuzzInput {
    /// Runs `data`; calls `problem` for each check that fails.
    static func run(_ data: [UInt8], problem: (String) -> Void) {
        guard let control = data.first else { return }
        let split = Int(control & 0x1F) + 1
        var decoder = FrameDecoder(maxBodyLength: control & 0x80 != 0 ? 1 << 20 : 256)
        let stream = data.dropFirst()
        var i = stream.startIndex
        while true {
            do {
                while let frame = try decoder.next() { check(frame, problem: problem) }
            } catch {
                break  // the stream is unusable from here, as the daemon decides too
            }
            guard i < stream.endIndex else { break }
            let end = min(i + split, stream.endIndex)
            decoder.append(stream[i..<end])
            i = end
        }
        // The field list reader on its own, on the raw bytes.
        if let reader = try? FieldReader(Array(stream)) {
            for tag: UInt16 in 0..<16 {
                _ = try? reader.string(tag)
                _ = try? reader.integer(tag, as: UInt32.self)
                _ = try? reader.bool(tag)
            }
        }
    }

    private static func check(_ frame: Frame, problem: (String) -> Void) {
        if frame.bytes.count != FrameHeader.size + frame.body.count { problem("frame length") }
        guard let message = try? Message(frame: frame) else { return }
        let decoded: Message
        do {
            decoded = try Message(frame: message.frame(requestID: frame.requestID))
        } catch {
            problem("\(message.type) encodes to a frame that does not parse: \(error)")
            return
        }
        if decoded != message { problem("\(message.type) changes in a round trip") }
        _ = message.isTerminal
    }
}
