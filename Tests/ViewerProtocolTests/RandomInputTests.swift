import Testing
import ViewerProtocol
import ViewerTestSupport

/// Hostile bytes: whatever a peer sends, decoding returns or throws, never traps.
@Suite("Random input")
struct RandomInputTests {
    static let iterations = 20_000

    @Test("random byte strings fed to FrameDecoder only return or throw")
    func frameDecoder() throws {
        var rng = SeededGenerator(seed: 0x5EED_F00D)
        var outcomes = (frames: 0, thrown: 0)
        for _ in 0..<Self.iterations {
            // Half start with a valid header of a random small length, so frames come out and
            // reach the message decoder; the rest is noise
            var bytes: [UInt8] = []
            if Bool.random(using: &rng) {
                FrameHeader(type: UInt8.random(in: 0...255, using: &rng), flags: UInt16.random(in: 0...UInt16.max, using: &rng),
                            requestID: UInt32.random(in: 0...UInt32.max, using: &rng),
                            bodyLength: UInt32.random(in: 0...80, using: &rng)).write(to: &bytes)
            }
            bytes += rng.bytes(count: Int.random(in: 0...80, using: &rng))
            var decoder = FrameDecoder(maxBodyLength: UInt32.random(in: 0...96, using: &rng))
            var offset = 0
            do {
                while offset < bytes.count {
                    let end = min(bytes.count, offset + Int.random(in: 1...20, using: &rng))
                    decoder.append(bytes[offset..<end])
                    offset = end
                    while let frame = try decoder.next() {
                        outcomes.frames += 1
                        _ = try? Message(frame: frame)
                    }
                }
            } catch {
                outcomes.thrown += 1
            }
        }
        #expect(outcomes.frames > 0)
        #expect(outcomes.thrown > 0)
    }

    @Test("random bodies with random types fed to Message(frame:) only return or throw, and what decodes re-encodes")
    func messageDecoding() throws {
        var rng = SeededGenerator(seed: 0xC0FF_EE00)
        let knownTypes = MessageType.allCases.map(\.rawValue)
        var outcomes = (decoded: 0, thrown: 0)
        for _ in 0..<Self.iterations {
            let type = Bool.random(using: &rng) ? knownTypes.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            let body = Bool.random(using: &rng) ? rng.bytes(count: Int.random(in: 0...64, using: &rng))
                                                : Self.randomFields(using: &rng)
            let frame = Frame(type: type, requestID: UInt32.random(in: 0...UInt32.max, using: &rng), body: body)
            do {
                let message = try Message(frame: frame)
                outcomes.decoded += 1
                // Whatever decodes is a message the encoder can write and read back unchanged
                #expect(try Message(frame: message.frame(requestID: frame.requestID)) == message)
            } catch {
                outcomes.thrown += 1
            }
        }
        #expect(outcomes.decoded > 0)
        #expect(outcomes.thrown > 0)
    }

    /// A well-formed field list with tags and widths near the real ones, so decoding gets past
    /// the field layer and exercises the value checks.
    private static func randomFields(using rng: inout SeededGenerator) -> [UInt8] {
        var writer = FieldWriter()
        var used = Set<UInt16>()
        for _ in 0..<Int.random(in: 0...14, using: &rng) {
            let tag = UInt16.random(in: 0...14, using: &rng)
            guard used.insert(tag).inserted || Int.random(in: 0..<10, using: &rng) == 0 else { continue }
            switch Int.random(in: 0..<6, using: &rng) {
            case 0: writer.put(tag, UInt8.random(in: 0...6, using: &rng))
            case 1: writer.put(tag, UInt16.random(in: 0...3, using: &rng))
            case 2: writer.put(tag, UInt32.random(in: 0...10_000, using: &rng))
            case 3: writer.put(tag, UInt64.random(in: 0...UInt64.max, using: &rng))
            case 4: writer.put(tag, "/p\(Int.random(in: 0...99, using: &rng)).jpg")
            default: writer.put(tag, bytes: rng.bytes(count: Int.random(in: 0...40, using: &rng)))
            }
        }
        return writer.bytes
    }
}
