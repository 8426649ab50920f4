import Foundation
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// Monotonic nanoseconds.
@inline(__always) func now() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
}

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// What the bench reads of a frame without decoding it (no copy of the image).
extension Frame {
    var messageType: MessageType? { MessageType(rawValue: type) }

    /// RESULT's `from_cache` (tag 4), found by scanning the fields.
    var fromCache: Bool {
        var offset = 0
        while offset + 6 <= body.count {
            let tag = UInt16(body[offset]) | UInt16(body[offset + 1]) << 8
            let length = Int(UInt32(body[offset + 2]) | UInt32(body[offset + 3]) << 8
                             | UInt32(body[offset + 4]) << 16 | UInt32(body[offset + 5]) << 24)
            if tag == 4 { return length == 1 && body[offset + 6] != 0 }
            offset += 6 + length
        }
        return false
    }

    /// The fully decoded message (copies the image; not for hot loops).
    func message() throws -> Message {
        try Message(frame: self)
    }
}

/// A frame to send many times with different request ids: encoded once, id patched in place.
struct FrameTemplate {
    var bytes: [UInt8]

    init(_ message: Message) { bytes = message.frame(requestID: 0).bytes }

    func with(id: UInt32) -> [UInt8] {
        var copy = bytes
        copy[8] = UInt8(truncatingIfNeeded: id)
        copy[9] = UInt8(truncatingIfNeeded: id >> 8)
        copy[10] = UInt8(truncatingIfNeeded: id >> 16)
        copy[11] = UInt8(truncatingIfNeeded: id >> 24)
        return copy
    }
}

/// The rendition every scenario asks for: a 256-pixel box, fit, JPEG at the default quality.
let thumbnailSpec = RenditionSpec(width: 256, height: 256, fit: .fit, format: .jpeg)

func renderFrame(_ path: String, spec: RenditionSpec = thumbnailSpec, priority: Priority = .normal, delivery: DeliveryMode = .final,
                 id: UInt32) -> [UInt8] {
    Message.render(RenderRequest(path: path, spec: spec, priority: priority, delivery: delivery)).frame(requestID: id).bytes
}

/// Runs `body(i)` on `count` new threads at once and waits for all of them.
func runThreads(_ count: Int, name: String = "bench", _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for i in 0..<count {
        group.enter()
        let thread = Thread {
            body(i)
            group.leave()
        }
        thread.name = "\(name)-\(i)"
        thread.stackSize = 1 << 20
        thread.start()
    }
    group.wait()
}

/// A one-shot barrier: `count` threads wait until all have arrived.
final class Barrier: @unchecked Sendable {
    private let condition = NSCondition()
    private var waiting = 0
    private let count: Int

    init(_ count: Int) { self.count = count }

    func wait() {
        condition.lock()
        waiting += 1
        if waiting >= count {
            condition.broadcast()
        } else {
            while waiting < count { condition.wait() }
        }
        condition.unlock()
    }
}
