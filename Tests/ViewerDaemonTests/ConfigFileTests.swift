import Testing
@testable import ViewerDaemon

@Suite("ConfigFile")
struct ConfigFileTests {
    func parse(_ text: String) throws(ConfigError) -> ConfigFile {
        try ConfigFile.parse(Array(text.utf8), path: "/etc/viewerd/viewerd.conf")
    }

    /// The `file:line: message` a text fails with.
    func failure(_ text: String) -> String? {
        do throws(ConfigError) {
            _ = try parse(text)
            return nil
        } catch {
            return error.description
        }
    }

    // MARK: Valid files

    @Test("key = value lines, comments, blank lines, blanks around both sides")
    func validFile() throws {
        // Given a file with every kind of line
        let text = """
            # viewerd
              # an indented comment

            workers = 4
            cache-budget=2G
            \tmemory-budget   =\t512M\u{20}\u{20}
            socket-group =
            shared-roots = /srv/a b:/srv/#c
            """

        // When it is parsed
        let file = try parse(text)

        // Then every setting is there with its line, values literal and trimmed
        #expect(file.entries == [
            .init(key: "workers", value: "4", line: 4),
            .init(key: "cache-budget", value: "2G", line: 5),
            .init(key: "memory-budget", value: "512M", line: 6),
            .init(key: "socket-group", value: "", line: 7),
            .init(key: "shared-roots", value: "/srv/a b:/srv/#c", line: 8),
        ])
    }

    @Test("an empty file, a file of comments and CR LF line ends")
    func emptyAndWindowsFiles() throws {
        #expect(try parse("").entries.isEmpty)
        #expect(try parse("# nothing\n\n   \n").entries.isEmpty)
        #expect(try parse("workers = 2\r\nidle-exit = 5\r\n").entries.map(\.value) == ["2", "5"])
    }

    @Test("a value may contain \"=\": only the first one separates")
    func equalsInValue() throws {
        #expect(try parse("socket = /run/a=b.sock").entries.first?.value == "/run/a=b.sock")
    }

    // MARK: Errors, each with its line

    @Test("a line without \"=\"")
    func missingEquals() {
        #expect(failure("workers = 2\n\nworkers 4\n") == "/etc/viewerd/viewerd.conf:3: expected \"key = value\", found \"workers 4\"")
    }

    @Test("a line without a key")
    func missingKey() {
        #expect(failure("# header\n = 4") == "/etc/viewerd/viewerd.conf:2: no key before \"=\"")
    }

    @Test("a key set twice names the first line")
    func duplicateKey() {
        #expect(failure("workers = 2\n# again\nworkers = 3") == "/etc/viewerd/viewerd.conf:3: workers is already set on line 1")
    }

    @Test("bytes that are not UTF-8")
    func notUTF8() {
        var bytes = Array("workers = 2\nsocket = /run/".utf8)
        bytes += [0xFF, 0xFE]
        #expect(throws: ConfigError(.file("/x.conf", line: 2), "not UTF-8 text")) {
            try ConfigFile.parse(bytes, path: "/x.conf")
        }
    }

    @Test("errors are configuration errors: exit 78")
    func exitCode() throws {
        let error = try #require(throws: ConfigError.self) { try parse("oops") }
        #expect(error.exitCode == 78)
        #expect(!error.isUsage)
    }

    // MARK: Reading files

    @Test("a missing default file is no file; a missing --config file is an error")
    func missingFile() throws {
        #expect(try ConfigFile.load(path: "/nonexistent/viewerd.conf", required: false) == nil)
        let error = try #require(throws: ConfigError.self) {
            try ConfigFile.load(path: "/nonexistent/viewerd.conf", required: true)
        }
        #expect(error.description == "/nonexistent/viewerd.conf: cannot read the config file: No such file or directory")
        #expect(error.exitCode == 78)
    }

    @Test("a directory is not a config file; /dev/null is an empty one")
    func directoryAndDevNull() throws {
        #expect(throws: ConfigError.self) { try ConfigFile.load(path: "/tmp", required: false) }
        #expect(try ConfigFile.load(path: "/dev/null", required: true)?.entries == [])
    }

    // MARK: Where the file is

    @Test("root reads /etc; a user $XDG_CONFIG_HOME, else ~/.config")
    func defaultPath() {
        #expect(ConfigFile.defaultPath(environment: ["XDG_CONFIG_HOME": "/x"], uid: 0, home: "/root")
                == "/etc/viewerd/viewerd.conf")
        #expect(ConfigFile.defaultPath(environment: ["XDG_CONFIG_HOME": "/home/a/.cfg"], uid: 1000, home: "/home/a")
                == "/home/a/.cfg/viewerd/viewerd.conf")
        #expect(ConfigFile.defaultPath(environment: [:], uid: 1000, home: "/home/a") == "/home/a/.config/viewerd/viewerd.conf")
        // A relative XDG_CONFIG_HOME is invalid by the XDG spec: ignored
        #expect(ConfigFile.defaultPath(environment: ["XDG_CONFIG_HOME": "cfg"], uid: 1000, home: "/home/a")
                == "/home/a/.config/viewerd/viewerd.conf")
    }
}
