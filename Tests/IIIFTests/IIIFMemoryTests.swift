import HTTPMessage
import Testing
@testable import IIIF

/// The front's memory: bounded by its budget, keeping what is read, and keyed so that a
/// changed source or another base URI finds nothing.
@Suite("IIIFMemory")
struct IIIFMemoryTests {
    func answer(_ bytes: Int, status: Int = 200) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": "image/jpeg"], body: [UInt8](repeating: 7, count: bytes))
    }

    @Test("never holds more than its budget, however many answers are kept")
    func bounded() {
        let memory = IIIFMemory(responseBytes: 64_000)
        for index in 0..<1000 {
            memory.keep(answer(1000 + index % 3000), key: "k\(index)")
            #expect(memory.responseUsage.bytes <= 64_000)
        }
        #expect(memory.responseUsage.entries > 0)
    }

    @Test("an answer read since the last turn stays; one never read again goes")
    func keepsWhatIsRead() {
        let memory = IIIFMemory(responseBytes: 16_000)
        memory.keep(answer(500), key: "hot")
        for index in 0..<200 {
            memory.keep(answer(500), key: "cold\(index)")
            #expect(memory.response("hot") != nil, "the answer read at every step was dropped at \(index)")
        }
        #expect(memory.response("cold0") == nil)
        #expect(memory.response("cold199") != nil)
    }

    @Test("keeps only 200s, and nothing larger than a sixteenth of its budget; 0 keeps nothing")
    func whatIsKept() {
        let memory = IIIFMemory(responseBytes: 16_000)
        memory.keep(answer(10, status: 404), key: "error")
        memory.keep(answer(1001), key: "large")
        memory.keep(answer(1000), key: "fits")
        #expect(memory.response("error") == nil && memory.response("large") == nil && memory.response("fits") != nil)
        let none = IIIFMemory(responseBytes: 0, infoEntries: 0)
        none.keep(answer(1), key: "a")
        none.keep(IIIFSourceInfo(width: 1, height: 1), path: "/a", identity: FileIdentity(device: 1, inode: 1, size: 1, mtimeNanoseconds: 1))
        #expect(none.response("a") == nil)
        #expect(none.info(path: "/a", identity: FileIdentity(device: 1, inode: 1, size: 1, mtimeNanoseconds: 1)) == nil)
    }

    @Test("INFO is kept by path and identity: a changed file finds none")
    func infoByIdentity() {
        let memory = IIIFMemory(responseBytes: 0)
        let identity = FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4)
        memory.keep(IIIFSourceInfo(width: 60, height: 40), path: "/p/a.jpg", identity: identity)
        #expect(memory.info(path: "/p/a.jpg", identity: identity)?.width == 60)
        var changed = identity
        changed.mtimeNanoseconds += 1
        #expect(memory.info(path: "/p/a.jpg", identity: changed) == nil)
        #expect(memory.info(path: "/p/b.jpg", identity: identity) == nil)
    }

    @Test("an answer's key is its ETag and its base: the same tile through another public base is another key")
    func answerKeys() throws {
        let tree = try TemporaryTree()
        let target = "/iiif/3/photos%2F2024%2Fa.jpg/0,0,256,256/256,/0/default.jpg"
        let one = try unwrap(tree.front().handle(get(target, ["Host": "one.example"])).infoNeed)
        let again = try unwrap(tree.front().handle(get(target, ["Host": "one.example"])).infoNeed)
        let other = try unwrap(tree.front().handle(get(target, ["Host": "two.example"])).infoNeed)
        #expect(one.answerKey == again.answerKey)
        #expect(one.answerKey != other.answerKey)
        try tree.write("root/2024/a.jpg", "rewritten jpeg")
        let changed = try unwrap(tree.front().handle(get(target, ["Host": "one.example"])).infoNeed)
        #expect(changed.answerKey != one.answerKey)
    }
}
