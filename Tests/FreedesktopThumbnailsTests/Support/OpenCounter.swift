import Glibc

/// Counts, by path, the opens of files in some directories, as the kernel reports them
/// (inotify's IN_OPEN): how often code read a file, observed from outside it, without a hook
/// in the code.
///
/// ```swift
/// let opens = try OpenCounter(directories: [cache + "/large"])
/// … the work …
/// #expect(try opens.counts()[cache + "/large/abc.png"] == 1)
/// ```
final class OpenCounter {
    private let fd: Int32
    /// The directory of each watch descriptor.
    private var directories: [Int32: String] = [:]

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ what: String, _ code: Int32 = errno) { description = "\(what): \(String(cString: strerror(code)))" }
    }

    init(directories: [String]) throws {
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard fd >= 0 else { throw Failure("inotify_init1") }
        for directory in directories {
            // The closes too: the kernel folds an event into an identical one still unread,
            // so two opens of one file in a row must have another event between them.
            let watch = inotify_add_watch(fd, directory, UInt32(IN_OPEN | IN_CLOSE_NOWRITE | IN_CLOSE_WRITE))
            guard watch >= 0 else {
                close(fd)
                throw Failure("inotify_add_watch \(directory)")
            }
            self.directories[watch] = directory
        }
    }

    deinit { close(fd) }

    /// The opens seen since `init`, by path; fails if the kernel's queue overflowed.
    func counts() throws -> [String: Int] {
        var counts: [String: Int] = [:]
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n < 0 && errno == EAGAIN { return counts }
            guard n > 0 else { throw Failure("read inotify") }
            var offset = 0
            while offset < n {
                let (watch, mask, length) = buffer.withUnsafeBytes { bytes in
                    (bytes.load(fromByteOffset: offset, as: Int32.self), bytes.load(fromByteOffset: offset + 4, as: UInt32.self),
                     Int(bytes.load(fromByteOffset: offset + 12, as: UInt32.self)))
                }
                if mask & UInt32(IN_Q_OVERFLOW) != 0 { throw Failure("inotify queue", ENOSPC) }
                if mask & UInt32(IN_OPEN) != 0, length > 0 {
                    let name = buffer[(offset + 16)..<(offset + 16 + length)].prefix { $0 != 0 }
                    counts[(directories[watch] ?? "?") + "/" + String(decoding: name, as: UTF8.self), default: 0] += 1
                }
                offset += 16 + length
            }
        }
    }
}
