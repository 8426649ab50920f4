import Foundation
import Testing
import ViewerLog
@testable import ViewerDaemon
@testable import ViewerLog

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

    @Test("a client's path cannot forge a line, hide text or drive a terminal", arguments: [
        ("/p/a\r\nlevel=info event=forged", #""/p/a\r\nlevel=info event=forged""#),
        ("/p/a\rX", #""/p/a\rX""#),
        ("/p/\u{1B}[2J", #""/p/\x1b[2J""#),
        ("/p/\u{07}\u{00}\u{7F}\u{85}", #""/p/\x07\x00\x7f\x85""#),
        ("/p/a\u{2028}b\u{2029}c", #""/p/a\u{2028}b\u{2029}c""#),
        ("/p/\u{202E}gpj.exe", #""/p/\u{202e}gpj.exe""#),
        ("/p/tab\there", #""/p/tab\there""#),
        ("/p/back\\slash", #""/p/back\\slash""#),
        ("/p/été.jpg", "/p/été.jpg"),
    ])
    func controlCharacters(_ input: String, _ expected: String) {
        #expect(Log.quote(input) == expected)
        #expect(!Log.quote(input).unicodeScalars.contains { Log.needsEscape($0) })
    }
}
