import CSandbox
#if canImport(Glibc)
import Glibc
import ViewerLog
#endif

/// The daemon's side of a worker's read-only opens (issue 15): the worker's filter hands each
/// `open`/`openat` without write intent to the daemon (seccomp user notification, the
/// listener passed over the worker's channel with its first frame); the slot's thread reads
/// the path from the waiting thread's memory and lets the call run when it lies in the
/// worker's view (`WorkerSandbox.readable`: fonts, shared data, libraries), else fails it
/// (EACCES) and the slot logs the path (once) and counts it. Only read-only opens come here:
/// raster decodes make none, an SVG or PDF with text a few (fonts, poppler's data), so the
/// round trip is paid a handful of times a job.
///
/// A refusal, not a kill (issue 29): a font fontconfig is configured to find outside the view
/// (a `<dir>` under /opt, a snap's fonts) and an exploit after /etc/passwd make the same call,
/// and a kill made the benign SVG a permanent `decoder-crashed`. Neither reads anything;
/// the log line names what was asked for.
///
/// The decision is on the path as read, not on the file the kernel then opens: a thread of
/// the worker may change the string after the read (the known race of
/// SECCOMP_USER_NOTIF_FLAG_CONTINUE), and a symbolic link under an allowed directory may point
/// elsewhere. Neither opens anything: Landlock, enforced by the kernel on the file actually
/// reached, still refuses it (EACCES). The race can at worst spare an open its log line, never
/// grant a read (docs/DECISIONS.md).
struct OpenSupervisor: Sendable {
    /// Directories (and files) whose opens run: what Landlock lets the worker read.
    let view: [String]

    init(environment: [String: String]) {
        let paths = WorkerSandbox.readable(environment: environment)
        view = paths.read + paths.execute
    }

    enum Verdict: Equatable, Sendable {
        /// In the view (or undecidable: Landlock decides), run.
        case allow
        /// Outside the view: failed (EACCES) here; the slot logs and counts it.
        case refuse(path: String)
        /// The thread is gone (the worker died meanwhile): nothing to answer.
        case gone
    }

    /// Takes one notification from `listener`, decides it and answers it.
    func next(listener: Int32) -> Verdict {
        var request = vd_open_request()
        let path = UnsafeMutablePointer<CChar>.allocate(capacity: Int(VD_PATH_BUFFER))
        let base = UnsafeMutablePointer<CChar>.allocate(capacity: Int(VD_PATH_BUFFER))
        defer {
            path.deallocate()
            base.deallocate()
        }
        guard vd_notify_receive(listener, &request, path, base) == 0 else { return .gone }
        let verdict: Verdict
        if request.read_errno != 0 {
            // EPERM (Yama, a worker not dumpable), EFAULT or ENAMETOOLONG: the path cannot be
            // known; the kernel refuses a bad pointer or name itself, and Landlock the rest.
            Log.warning("event=sandbox-open-unchecked error=\(Log.quote(String(cString: strerror(request.read_errno))))")
            verdict = .allow
        } else {
            verdict = decide(path: String(cString: path), base: String(cString: base))
        }
        return vd_notify_answer(listener, request.id, verdict == .allow ? 1 : 0) == 0 ? verdict : .gone
    }

    /// The verdict on `path` as the thread passed it; `base` is the directory a relative path
    /// starts from (empty when unknown).
    func decide(path: String, base: String) -> Verdict {
        // An empty name fails (ENOENT) without opening anything.
        if path.isEmpty { return .allow }
        let absolute: String
        if path.hasPrefix("/") {
            absolute = path
        } else {
            guard base.hasPrefix("/") else { return .allow }  // undecidable: Landlock decides
            absolute = base + "/" + path
        }
        let normal = Self.normalize(absolute)
        return view.contains { normal == $0 || normal.hasPrefix($0.hasSuffix("/") ? $0 : $0 + "/") } ? .allow : .refuse(path: normal)
    }

    /// `path` without `.`, `..` and repeated slashes, lexically (as the kernel walks it
    /// when no symbolic link intervenes).
    static func normalize(_ path: String) -> String {
        var parts: [Substring] = []
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            if part == "." { continue }
            if part == ".." {
                _ = parts.popLast()
                continue
            }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }
}
