import Foundation
import Testing
@testable import ViewerDaemon

@Suite("Log")
struct LogTests {
    @Test("JOURNAL_STREAM counts only when it names the descriptor's device and inode")
    func journalStream() throws {
        // Given a pipe standing in for the journal's stream
        let pipe = Pipe()
        let fd = pipe.fileHandleForWriting.fileDescriptor
        var st = stat()
        #expect(fstat(fd, &st) == 0)

        // Then its own device:inode matches, anything else does not
        #expect(Log.journalStream("\(st.st_dev):\(st.st_ino)", matches: fd))
        #expect(!Log.journalStream("\(st.st_dev):\(st.st_ino + 1)", matches: fd))
        #expect(!Log.journalStream(nil, matches: fd))
        #expect(!Log.journalStream("garbage", matches: fd))
        #expect(!Log.journalStream("\(st.st_dev):\(st.st_ino)", matches: -1))
    }

    @Test("quoting of field values")
    func quoting() {
        #expect(Log.quote("plain") == "plain")
        #expect(Log.quote("two words") == "\"two words\"")
        #expect(Log.quote("") == "\"\"")
        #expect(Log.quote("a\"b\nc") == "\"a\\\"b\\nc\"")
    }
}
