import Foundation
@testable import RenditionStore
import Testing
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

@Suite("Crash safety")
struct CrashTests {
    /// Starts the writer child on `directory` and returns once it has opened the store.
    private func startWriter(_ directory: String, seed: Int) throws -> Process {
        let child = Process()
        child.executableURL = URL(fileURLWithPath: DaemonProcess.executable("store-crash-writer"))
        child.arguments = ["write", directory, "\(seed)"]
        let output = Pipe()
        child.standardOutput = output
        child.standardError = FileHandle.nullDevice
        try child.run()
        var seen = ""
        while !seen.contains("open") {
            let data = output.fileHandleForReading.availableData
            if data.isEmpty { break }  // the child died before opening: the test says so below
            seen += String(decoding: data, as: UTF8.self)
        }
        return child
    }

    /// True when the payload is what the writer derives from the key (n, then a pattern).
    private func verify(_ key: [UInt8], _ payload: UnsafeRawBufferPointer) -> Bool {
        let n = UInt64(key[11]) | UInt64(key[12]) << 8 | UInt64(key[13]) << 16
        guard payload.count >= 8, payload.loadLE(UInt64.self, at: 0) == n else { return false }
        for i in 8..<payload.count where payload[i] != UInt8(truncatingIfNeeded: n &* 31 &+ UInt64(i)) { return false }
        return true
    }

    @Test("a writer killed with SIGKILL at random points, twenty times: every reopen succeeds and every entry verifies")
    func killedWriter() throws {
        // Given a store that a child process writes to in a loop
        let dir = try StoreDirectory()
        var verified = 0, sawEntries = 0
        for round in 0..<20 {
            let child = try startWriter(dir.path, seed: round + 1)
            // When it is killed at a random point
            usleep(UInt32.random(in: 20_000...250_000))
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            #expect(child.terminationReason == .uncaughtSignal, "round \(round): the writer died on its own")
            // Then the store reopens as it is (not moved aside)
            let logged = LogLines()
            var configuration = StoreConfiguration(directory: dir.path, budgetBytes: 3 << 20)
            configuration.mapSize = 4 << 20
            let store = try RenditionStore(configuration, log: { logged.append($0) })
            #expect(!logged.lines.contains { $0.contains("moved-aside") }, "round \(round): \(logged.lines)")
            // And every committed entry reads back, its checksum and content verified
            let reader = store.makeReader()
            let keys = store.committedKeys()
            for key in keys {
                let ok = reader.withRendition(renditionKey(bytes: key)) { _, payload in verify(key, payload) }
                #expect(ok == true, "round \(round): an entry did not verify")
                if ok == true { verified += 1 }
            }
            if !keys.isEmpty { sawEntries += 1 }
            #expect(store.stats.corrupt == 0)
            #expect(store.consistencyProblems() == [], "round \(round)")
            store.close()
        }
        print("crash: 20 SIGKILLs, \(verified) entries read back and verified")
        #expect(sawEntries >= 15)
    }
}
