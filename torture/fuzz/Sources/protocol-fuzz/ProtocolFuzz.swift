import ViewerProtocol

/// One fuzz input: byte 0 steers (how the stream is split into reads, which body limit the
/// decoder has), the rest is a byte stream from a peer. Every frame the decoder returns is
/// parsed as a message; every message that parses must encode to a frame that parses back
/// to the same message. A trap anywhere (overflow, index out of range, a failed
/// precondition) is a crash libFuzzer keeps.
///
/// Tests/ViewerProtocolTests/FuzzRegressionTests.swift runs the same checks on every input
/// kept in Tests/ViewerProtocolTests/FuzzRegressions/.
enum ProtocolFuzz {
    static func check(_ data: [UInt8]) {
        guard let control = data.first else { return }
        let split = Int(control & 0x1F) + 1
        var decoder = FrameDecoder(maxBodyLength: control & 0x80 != 0 ? 1 << 20 : 256)
        let stream = data.dropFirst()
        var i = stream.startIndex
        while true {
            do {
                while let frame = try decoder.next() { checkFrame(frame) }
            } catch {
                break  // the stream is unusable from here, as the daemon decides too
            }
            guard i < stream.endIndex else { break }
            let end = min(i + split, stream.endIndex)
            decoder.append(stream[i..<end])
            i = end
        }
        // The field list reader on its own, on the raw bytes.
        if let reader = try? FieldReader(Array(stream), message: "fuzz") {
            for tag: UInt16 in 0..<16 {
                _ = try? reader.string(tag)
                _ = try? reader.integer(tag, as: UInt32.self)
                _ = try? reader.bool(tag)
            }
        }
    }

    static func checkFrame(_ frame: Frame) {
        let bytes = frame.bytes
        precondition(bytes.count == FrameHeader.size + frame.body.count, "frame length")
        guard let message = try? Message(frame: frame) else { return }
        let encoded = message.frame(requestID: frame.requestID)
        let decoded: Message
        do {
            decoded = try Message(frame: encoded)
        } catch {
            preconditionFailure("\(message.type) encodes to a frame that does not parse: \(error)")
        }
        precondition(decoded == message, "\(message.type) changes in a round trip")
        _ = message.isTerminal
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    ProtocolFuzz.check(Array(UnsafeBufferPointer(start: data, count: size)))
    return 0
}

/// SwiftPM links an executable target's entry point as `<module>_main` and points `main` at
/// it; hand control to libFuzzer's driver from there (its own main is then not linked in).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

@_cdecl("protocol_fuzz_main")
public func protocolFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var vector = argv
    return LLVMFuzzerRunDriver(&count, &vector) { data, size in fuzzOneInput(data, size) }
}
