import Foundation

/// What /proc says about a process: its memory, children, CPU time and descriptors. Every
/// reader returns 0, nil or an empty list for a process that is gone.
public enum ProcessTable {
    /// Memory of one process, in bytes, from /proc/<pid>/status.
    public struct Memory: Sendable {
        /// Resident now (VmRSS).
        public var resident: UInt64 = 0
        /// The anonymous part of `resident` (heap, stacks; no mapped files): RssAnon.
        public var anonymous: UInt64 = 0
        /// The highest resident size so far (VmHWM).
        public var peak: UInt64 = 0
    }

    public static func memory(of pid: pid_t) -> Memory? {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return nil }
        var memory = Memory()
        for line in text.split(separator: "\n") {
            if line.hasPrefix("VmRSS:") { memory.resident = kilobytes(line) }
            else if line.hasPrefix("RssAnon:") { memory.anonymous = kilobytes(line) }
            else if line.hasPrefix("VmHWM:") { memory.peak = kilobytes(line) }
        }
        return memory
    }

    /// Proportional set size in bytes (/proc/<pid>/smaps_rollup): shared pages split between
    /// the processes that map them. 0 when unreadable.
    public static func proportionalSet(of pid: pid_t) -> UInt64 {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/smaps_rollup", encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").first { $0.hasPrefix("Pss:") }.map(kilobytes) ?? 0
    }

    /// Direct children (the daemon's decode workers), from every thread's `children` file;
    /// falls back to scanning /proc when the kernel has no such files.
    public static func children(of pid: pid_t) -> [pid_t] {
        guard pid > 0 else { return [] }
        let taskDir = "/proc/\(pid)/task"
        if let tasks = try? FileManager.default.contentsOfDirectory(atPath: taskDir),
           FileManager.default.fileExists(atPath: "\(taskDir)/\(tasks.first ?? "")/children") {
            var out: [pid_t] = []
            for task in tasks {
                guard let text = try? String(contentsOfFile: "\(taskDir)/\(task)/children", encoding: .utf8) else { continue }
                out += text.split(separator: " ").compactMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            }
            return out
        }
        return ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let child = pid_t(entry), let fields = statFields(child), fields.count > 1, pid_t(fields[1]) == pid else { return nil }
            return child
        }
    }

    /// Whether a process exists and is not a zombie.
    public static func isAlive(_ pid: pid_t) -> Bool {
        guard let state = statFields(pid)?.first else { return false }
        return state != "Z" && state != "X"
    }

    /// CPU seconds (user + system) the process has used so far.
    public static func cpuSeconds(of pid: pid_t) -> Double {
        // After the command: state, ppid, …; utime and stime are the 12th and 13th.
        guard let fields = statFields(pid), fields.count > 12, let user = Double(fields[11]),
              let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// Threads of the process (the Threads line of /proc/<pid>/status), 0 when gone.
    public static func threadCount(of pid: pid_t) -> Int {
        guard pid > 0, let text = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8) else { return 0 }
        return text.split(separator: "\n").first { $0.hasPrefix("Threads:") }.flatMap { Int($0.dropFirst(8).trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    /// Open descriptors of the process, -1 when unreadable.
    public static func descriptorCount(of pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// The fields of /proc/<pid>/stat after the command name (which may contain spaces).
    private static func statFields(_ pid: pid_t) -> [Substring]? {
        guard pid > 0, let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return nil }
        return stat[stat.index(after: close)...].split(separator: " ")
    }

    private static func kilobytes(_ line: Substring) -> UInt64 {
        let digits = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "0"
        return (UInt64(digits.filter(\.isNumber)) ?? 0) * 1024
    }
}
