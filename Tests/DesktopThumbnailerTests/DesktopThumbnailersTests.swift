import DesktopThumbnailer
@testable import DesktopThumbnails
import Foundation
import Testing
import ViewerTestSupport

/// The desktop's `.thumbnailer` files as desktops read them (issue 21).
@Suite("DesktopThumbnailers")
struct DesktopThumbnailersTests {
    @Test("Exec is split as the Desktop Entry Specification quotes it")
    func splitExec() {
        #expect(DesktopThumbnailers.splitExec("evince-thumbnailer -s %s %u %o") == ["evince-thumbnailer", "-s", "%s", "%u", "%o"])
        #expect(DesktopThumbnailers.splitExec(#""/opt/my tools/thumb" --label "a \"b\" \\c" %i"#)
                == ["/opt/my tools/thumb", "--label", #"a "b" \c"#, "%i"])
        #expect(DesktopThumbnailers.splitExec(#"thumb """#) == ["thumb", ""])
        #expect(DesktopThumbnailers.splitExec(#"thumb "unterminated"#) == nil)
    }

    @Test("an entry needs its program installed (TryExec, Exec), a MIME type, and its own group")
    func parse() {
        let path = "/usr/bin:/bin"
        let good = DesktopThumbnailers.parse("""
            [Thumbnailer Entry]
            TryExec=sh
            Exec=sh -c true %i %o
            MimeType=application/x-a;application/x-b;
            """, file: "/f", path: path)
        #expect(good?.program.hasSuffix("/sh") == true && good?.file == "/f")
        #expect(good?.arguments == ["-c", "true", "%i", "%o"] && good?.mimeTypes == ["application/x-a", "application/x-b"])
        #expect(DesktopThumbnailers.parse("[Thumbnailer Entry]\nTryExec=no-such-program\nExec=sh %i\nMimeType=a/b;\n",
                                          file: "/f", path: path) == nil)
        #expect(DesktopThumbnailers.parse("[Thumbnailer Entry]\nExec=no-such-program %i\nMimeType=a/b;\n", file: "/f", path: path) == nil)
        #expect(DesktopThumbnailers.parse("[Thumbnailer Entry]\nExec=sh %i\n", file: "/f", path: path) == nil)
        #expect(DesktopThumbnailers.parse("[Other]\nExec=sh %i\nMimeType=a/b;\n", file: "/f", path: path) == nil)
    }

    @Test("Exec's fields: %i %u %o %s %% expanded; an unknown one expands to nothing, and a word of nothing else is dropped")
    func execFields() throws {
        // Given an Exec with an unknown field alone, one inside a word, and one at a word's end
        let helper = try #require(DesktopThumbnailers.parse("""
            [Thumbnailer Entry]
            Exec=sh %q -s %s "pre%qpost" %i %u %o 100%% 5% %x%y ""
            MimeType=application/x-a;
            """, file: "/f", path: "/usr/bin:/bin"))

        // When it is run for a file
        let argv = helper.command(path: "/home/me/a b.odt", uri: "file:///home/me/a%20b.odt", output: "/run/o.png", size: 256)

        // Then no argument is left empty by a field (the word written "" stays one, as desktops keep it)
        #expect(argv.dropFirst() == ["-s", "256", "prepost", "/home/me/a b.odt", "file:///home/me/a%20b.odt", "/run/o.png", "100%", "5", ""])
    }

    @Test("the user's directory comes first, a file hides one of the same name later, the first helper of a type wins")
    func precedence() throws {
        let directory = try TemporaryDirectory(prefix: "thumbnailers")
        func write(_ folder: String, _ name: String, _ mime: String, _ argument: String) throws {
            try FileManager.default.createDirectory(atPath: directory.path + "/" + folder + "/thumbnailers", withIntermediateDirectories: true)
            try "[Thumbnailer Entry]\nExec=sh \(argument)\nMimeType=\(mime);\n"
                .write(toFile: directory.path + "/\(folder)/thumbnailers/\(name).thumbnailer", atomically: true, encoding: .utf8)
        }
        try write("home", "doc", "application/x-doc", "home")
        try write("local", "doc", "application/x-doc", "local")     // hidden by the user's of the same name
        try write("local", "other", "application/x-doc", "other")   // same type, later: not chosen
        try write("system", "font", "font/ttf", "system")
        let found = DesktopThumbnailers.installed(environment: [
            "XDG_DATA_HOME": directory.path + "/home", "XDG_DATA_DIRS": "\(directory.path)/local:\(directory.path)/system",
            "PATH": "/usr/bin:/bin",
        ])
        #expect(found.helpers.map(\.arguments) == [["home"], ["other"], ["system"]])
        #expect(found.helper(for: "application/x-doc")?.arguments == ["home"])
        #expect(found.helper(for: "font/ttf")?.arguments == ["system"])
        #expect(found.helper(for: "image/jpeg") == nil)
        #expect(found.mimeTypes == ["application/x-doc", "font/ttf"])
    }

    @Test("a FIFO swapped in under a file's name is refused at once by the MIME guess and by the helper's run, never waited on")
    func fifoIsRefused() async throws {
        // Given a FIFO that no one writes, named as a document
        let directory = try TemporaryDirectory(prefix: "mime-fifo")
        let fifo = directory.path + "/report.pdf"
        #expect(mkfifo(fifo, 0o600) == 0)

        // When the MIME type is guessed: an error at once
        let guess = Answer<Result<String, any Error>>()
        Thread { guess.give(Result { try DesktopThumbnailers.guessMimeType(path: fifo) }) }.start()
        // (A hang detector, not a speed test: the refusal takes microseconds, the old open waited for ever.)
        if guess.wait(seconds: 20) == nil {
            Issue.record("the MIME guess is still waiting for a writer of the FIFO")
            close(open(fifo, O_WRONLY | O_NONBLOCK))  // lets the stuck open return
        }
        #expect(throws: (any Error).self) { try guess.wait(seconds: 20)?.get() }

        // And when a helper would be run on it: refused as not a regular file, the helper not started
        let script = directory.path + "/reads.sh"
        try "#!/bin/sh\nhead -c 16 \"$1\" > /dev/null\necho ran > \"$2\"\n".write(toFile: script, atomically: true, encoding: .utf8)
        #expect(chmod(script, 0o755) == 0)
        let helper = DesktopThumbnailers.Helper(file: "/f", program: script, arguments: ["%i", "%o"], mimeTypes: ["application/pdf"])
        let runner = HelperRunner(helpers: DesktopThumbnailers(helpers: [helper]), guessMimeType: DesktopThumbnailers.guessMimeType, timeout: .seconds(20), concurrency: 1)
        defer { runner.stop() }
        let run = await runner.run(helper, path: fifo, uri: "file://" + fifo, size: 128)
        guard case .failure(.unreadable(let why)) = run else {
            Issue.record("the helper's run gave \(run), not a refusal")
            return
        }
        #expect(why.contains("not a regular file"), "\(why)")
    }

    @Test("a helper that puts a FIFO where its log was neither holds the runner nor loses its last words: the log is read from its descriptor")
    func helperLogIsReadFromItsDescriptor() async throws {
        // Given a helper that says why it fails, then swaps its log's name for a FIFO
        let directory = try TemporaryDirectory(prefix: "helper-log")
        let document = directory.path + "/a.doc", script = directory.path + "/swaps.sh"
        try "a document".write(toFile: document, atomically: true, encoding: .utf8)
        try "#!/bin/sh\necho 'cannot read the document' >&2\nlog=\"$(dirname \"$2\")/stderr\"\nrm -f \"$log\"\nmkfifo \"$log\"\nexit 1\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        #expect(chmod(script, 0o755) == 0)
        let helper = DesktopThumbnailers.Helper(file: "/f", program: script, arguments: ["%i", "%o"], mimeTypes: ["application/x-doc"])
        let runner = HelperRunner(helpers: DesktopThumbnailers(helpers: [helper]), guessMimeType: DesktopThumbnailers.guessMimeType, timeout: .seconds(20), concurrency: 1)
        defer { runner.stop() }

        // When it runs, on a thread of its own (the test pool's threads may all be held by
        // other tests: an awaited run would wait for a turn, not for the helper)
        let answer = Answer<Result<String, HelperRunner.Problem>>()
        Thread { answer.give(runner.runBlocking(helper, path: document, uri: "file://" + document, size: 128)) }.start()

        // Then its failure comes back with what it said, at once
        // (A hang detector, not a speed test: a log read by its name would wait for the FIFO's writer.)
        guard let run = answer.wait(seconds: 60) else {
            Issue.record("the runner is still waiting for a writer of the helper's FIFO")
            for scratch in try FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory()) where scratch.hasPrefix("viewerd-thumbnailer-") {
                let top = (NSTemporaryDirectory() as NSString).appendingPathComponent(scratch)
                for run in (try? FileManager.default.contentsOfDirectory(atPath: top)) ?? [] {
                    close(open(top + "/" + run + "/stderr", O_WRONLY | O_NONBLOCK))  // lets the stuck open return
                }
            }
            return
        }
        #expect(run == .failure(.failed("swaps.sh exited with 1: cannot read the document")))
    }

    @Test("a file's MIME type is guessed as the desktop does: by name, else by content")
    func guess() throws {
        let directory = try TemporaryDirectory(prefix: "mime-guess")
        try "hello\n".write(toFile: directory.path + "/a.txt", atomically: true, encoding: .utf8)
        try Data([0x25, 0x50, 0x44, 0x46, 0x2D, 0x31, 0x2E, 0x34, 0x0A]).write(to: URL(fileURLWithPath: directory.path + "/noname"))
        #expect(try DesktopThumbnailers.guessMimeType(path: directory.path + "/a.txt") == "text/plain")
        #expect(try DesktopThumbnailers.guessMimeType(path: directory.path + "/noname") == "application/pdf")
    }
}

/// A value one thread gives and another waits for, with a limit on the wait.
final class Answer<Value: Sendable>: @unchecked Sendable {
    // `value` is only read and written with `condition` locked.
    private var value: Value?
    private let condition = NSCondition()

    func give(_ value: Value) {
        condition.lock()
        defer { condition.unlock() }
        self.value = value
        condition.broadcast()
    }

    /// The value, or nil when none came within `seconds` (a later call waits again).
    func wait(seconds: Double) -> Value? {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date() + seconds
        while value == nil && condition.wait(until: deadline) {}
        return value
    }
}
