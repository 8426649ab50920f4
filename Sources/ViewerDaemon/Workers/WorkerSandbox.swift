import CSandbox
import Foundation
import Rendering
import SystemCalls
import ViewerLog
import ViewerProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The protections a worker managed to put on itself, as it reports them to the daemon
/// (`WorkerReply.sandbox`) and `viewerctl status` shows them.
struct WorkerProtections: OptionSet, Sendable, Hashable {
    let rawValue: UInt8

    /// The seccomp filter of `SandboxPolicy` is loaded.
    static let seccomp = WorkerProtections(rawValue: 1)
    /// PR_SET_NO_NEW_PRIVS: no exec can gain privileges (and seccomp needs it).
    static let noNewPrivs = WorkerProtections(rawValue: 2)
    /// Own user, network and IPC namespaces: no network at all, not even the host's abstract
    /// Unix sockets (the session bus, X11).
    static let namespaces = WorkerProtections(rawValue: 4)
    /// Landlock: files may be read only under the system's shared data and the font
    /// directories (`WorkerSandbox.readable`), and nothing may be written, created or removed.
    static let filesystem = WorkerProtections(rawValue: 16)
    /// RLIMIT_CPU and RLIMIT_CORE = 0 set, RLIMIT_AS too outside the sanitizers, and not
    /// dumpable (dumpable again under `checkedOpens`: the daemon reads the worker's memory).
    static let resourceLimits = WorkerProtections(rawValue: 8)
    /// The daemon checks each read-only open's path (it holds the filter's user-notification
    /// listener: `OpenSupervisor`), and refuses (EACCES), logs and counts one outside the
    /// Landlock view. Without it those opens fail (EACCES) unseen. (STATS' `sandbox_read_kill`,
    /// named when such an open killed the worker.)
    static let checkedOpens = WorkerProtections(rawValue: 32)
}

/// Puts the worker in its sandbox: namespaces first (only a single-threaded process may
/// enter a new user namespace), no_new_privs and Landlock (they bind the threads started
/// later), resource limits, then, once libvips is started and warmed, the seccomp filter,
/// before the first command is read. Every
/// step that the kernel refuses is skipped and left out of the report, never fatal: a worker
/// in a container without user namespaces still runs under seccomp.
enum WorkerSandbox {
    /// Limits of the worker process.
    struct Limits {
        /// RLIMIT_AS in bytes; 0 for none.
        var addressSpace: UInt64 = 0
        /// RLIMIT_CPU in seconds, the whole process's life; 0 for none. The daemon retires a
        /// worker between jobs once it has used half (`WorkerSlot`), so one job always has at
        /// least half before SIGXCPU.
        var cpuSeconds: UInt64 = 0
    }

    /// ThreadSanitizer and AddressSanitizer reserve terabytes of address space for their
    /// shadow memory (no RLIMIT_AS), and their runtimes make system calls of their own at any
    /// time (reading /proc/self/maps, a background thread, writing reports to log_path files):
    /// under them the seccomp filter stays off (make sanitize; docs/DECISIONS.md).
    static let sanitized = dlsym(nil, "__tsan_init") != nil || dlsym(nil, "__asan_init") != nil

    /// Step 1, first thing in the worker while it has one thread: own user, network and IPC
    /// namespaces where the kernel allows an unprivileged process them.
    static func isolate() -> WorkerProtections {
        vd_unshare_network() == 0 ? .namespaces : []
    }

    /// Where a confined worker may still read: what libvips' loaders read lazily during a job
    /// (found with strace over the corpora): fonts, fontconfig's configuration and caches, a
    /// user's fonts, poppler's data; the dynamic loader's cache and libraries (libvips loads
    /// its modules at start). Public system files only: no home directory but its fonts and
    /// font caches, no /etc but fonts, the loader cache and the time zone. Font directories
    /// fontconfig's files name elsewhere (a `<dir>` under /opt) are not added: the view does
    /// not follow a configuration file that may name a home; their opens are refused, logged.
    static func readable(environment: [String: String]) -> (read: [String], execute: [String]) {
        let home = environment["HOME"] ?? "/nonexistent"
        let data = environment["XDG_DATA_HOME"] ?? home + "/.local/share"
        let cache = environment["XDG_CACHE_HOME"] ?? home + "/.cache"
        let config = environment["XDG_CONFIG_HOME"] ?? home + "/.config"
        // Fonts of the system's other data directories (flatpak's, snap's exports), and a
        // fontconfig configuration the environment names (a file, or the directory of one).
        let dataDirectories = (environment["XDG_DATA_DIRS"] ?? "").split(separator: ":").filter { $0.hasPrefix("/") }
        let fontconfig = [environment["FONTCONFIG_FILE"], environment["FONTCONFIG_PATH"]].compactMap { $0 }.filter { $0.hasPrefix("/") }
        return (read: ["/usr/share", "/usr/local/share/fonts", "/etc/fonts", "/etc/ld.so.cache", "/etc/localtime",
                       "/var/cache/fontconfig", home + "/.fonts", home + "/.fontconfig", data + "/fonts",
                       cache + "/fontconfig", config + "/fontconfig"] + dataDirectories.map { $0 + "/fonts" } + fontconfig,
                execute: ["/usr/lib", "/usr/lib64", "/lib", "/lib64", "/usr/local/lib"])
    }

    /// Step 2, still single-threaded: no_new_privs (Landlock and seccomp need it), then the
    /// file-system view of `readable`. Not under the sanitizers (their reports are files).
    static func restrictFiles(environment: [String: String]) -> WorkerProtections {
        guard vd_no_new_privs() == 0 else { return [] }
        if sanitized { return .noNewPrivs }
        let paths = readable(environment: environment)
        let abi = Posix.withCStrings(paths.read) { read in
            Posix.withCStrings(paths.execute) { execute in
                vd_landlock(read, Int32(paths.read.count), execute, Int32(paths.execute.count))
            }
        }
        return abi >= 1 ? [.noNewPrivs, .filesystem] : .noNewPrivs
    }

    /// Step 3: resource limits, before libvips starts.
    static func limit(_ limits: Limits) -> WorkerProtections {
        var ok = vd_set_limit(Int32(VD_RLIMIT_CORE), 0, 0) == 0  // no core dump of a user's pixels
        ok = vd_not_dumpable() == 0 && ok  // nor a ptrace attach by another process of the user
        if limits.addressSpace > 0 && !sanitized {
            ok = (try? Posix.limitAddressSpace(limits.addressSpace)) != nil && ok
        }
        if limits.cpuSeconds > 0 {
            // SIGXCPU at the soft limit (the worker dies of it: the file is blamed); the hard
            // limit, a second later, is the kernel's SIGKILL should SIGXCPU be blocked.
            ok = vd_set_limit(Int32(VD_RLIMIT_CPU), limits.cpuSeconds, limits.cpuSeconds + 1) == 0 && ok
        }
        return ok ? .resourceLimits : []
    }

    /// Step 4: what libvips would otherwise open lazily during a job, done while opens are
    /// still allowed: fontconfig's configuration and caches, pango's modules (an SVG with
    /// text), poppler's data directories (a PDF with text), and Orc's code memory (a PNG
    /// shrunk by a fraction: libvips' reduce compiles an Orc program, and Orc maps its first
    /// 64 KiB code region, reused by every later program of the worker). Found with strace
    /// over the corpora (docs/DECISIONS.md).
    ///
    /// `text`: also the SVG and PDF text stack. Needed only where Landlock is missing (then every
    /// read-only open after the filter fails, and text would render without glyphs); with
    /// Landlock those files are read when a document first needs them, so a worker that only
    /// ever decodes photos does not carry pango, cairo's fonts and poppler (make bench: about
    /// 40 MiB of resident memory over two workers).
    static func warmUp(_ renderer: Renderer, text: Bool = true) {
        let small = RenditionSpec(width: 16, height: 16, format: .png)
        var documents = [Data(base64Encoded: blackPNG).map(Array.init) ?? []]
        if text { documents += [Array(svgWithText.utf8), pdfWithText] }
        for document in documents {
            _ = try? renderer.render(bytes: document, spec: small)
        }
    }

    /// Step 5: the seccomp filter of `SandboxPolicy` (no_new_privs is on since step 2).
    /// `filesConfined`: Landlock is on, so read-only opens may run (it decides where). With
    /// Landlock, the filter first hands those opens to the daemon (user notification); where
    /// the kernel cannot (before 5.7 with the filter on every thread), the plain filter.
    /// Returns what is on, and the listener to pass to the daemon (-1 when none).
    static func confine(channel: Int32, filesConfined: Bool, superviseOpens: Bool = true) -> (WorkerProtections, listener: Int32) {
        if sanitized { return ([], -1) }
        if filesConfined && superviseOpens {
            // The daemon reads each open's path from this process's memory
            // (process_vm_readv), which the kernel allows a process of the same user only
            // while this one is dumpable; RLIMIT_CORE stays 0 (the filter keeps it so), and
            // docs/DECISIONS.md says why that loses nothing.
            _ = vd_set_dumpable(1)
            if let listener = load(channel: channel, filesConfined: true, superviseOpens: true) {
                // Loaded: a second filter would not lift this one. Without its listener (not
                // seen: libseccomp keeps it from the load) the opens fail, ENOSYS, unkilled.
                if listener >= 0 { return ([.seccomp, .checkedOpens], listener) }
                _ = vd_not_dumpable()
                return (.seccomp, -1)
            }
            _ = vd_not_dumpable()
        }
        return (load(channel: channel, filesConfined: filesConfined, superviseOpens: false) != nil ? .seccomp : [], -1)
    }

    /// Builds and loads the filter; nil when it could not be (logged), else its listener
    /// (-1 without notify rules).
    private static func load(channel: Int32, filesConfined: Bool, superviseOpens: Bool) -> Int32? {
        guard let filter = vd_filter_new() else { return nil }
        defer { vd_filter_free(filter) }
        for rule in SandboxPolicy.rules(channel: channel, pid: getpid(), filesConfined: filesConfined,
                                        superviseOpens: superviseOpens) {
            let errnoValue: Int32 = switch rule.action {
            case .fail(let e): e
            case .notify: -1
            case .allow: 0
            }
            let conditions = rule.arguments.map { argument -> vd_condition in
                switch argument {
                case .equals(let index, let value): vd_condition(op: Int32(VD_ARG_EQ), arg: index, mask: 0, value: value)
                case .masked(let index, let mask, let value): vd_condition(op: Int32(VD_ARG_MASKED_EQ), arg: index, mask: mask, value: value)
                case .atLeast(let index, let value): vd_condition(op: Int32(VD_ARG_GE), arg: index, mask: 0, value: value)
                }
            }
            let rc = vd_filter_add(filter, rule.call, errnoValue, conditions, Int32(conditions.count))
            if rc < 0 {
                Log.error("event=sandbox-rule-failed call=\(rule.call) error=\(Log.quote(String(cString: strerror(-rc))))")
                return nil
            }
        }
        let rc = vd_filter_load(filter)
        guard rc == 0 else {
            // Without user notification (a kernel before 5.0, or before 5.7 with TSYNC) the
            // plain filter follows: only an error then.
            if superviseOpens {
                Log.info("event=sandbox-read-kill-unavailable error=\(Log.quote(String(cString: strerror(-rc))))")
            } else {
                Log.error("event=sandbox-load-failed error=\(Log.quote(String(cString: strerror(-rc))))")
            }
            return nil
        }
        return superviseOpens ? vd_filter_notify_fd(filter) : -1
    }

    /// 100x70 black RGB PNG: shrunk to 16x16 it goes through reduce, hence Orc.
    private static let blackPNG = "iVBORw0KGgoAAAANSUhEUgAAAGQAAABGCAIAAAC15KY+AAAACXBIWXMAAAPoAAAD6AG1e1JrAAAAK0lEQVR4nO3BAQ0AAADCoPdPbQ43oAAAAAAAAAAAAAAAAAAAAAAAAAAA+DFSTgABlI5TMgAAAABJRU5ErkJggg=="

    private static let svgWithText = """
        <svg xmlns="http://www.w3.org/2000/svg" width="64" height="32"><text x="0" y="10" font-family="sans-serif">Aa</text>\
        <text x="0" y="20" font-family="serif" font-style="italic">Aa</text><text x="0" y="30" font-family="monospace" \
        font-weight="bold">Aa</text></svg>
        """

    /// A one-page PDF drawing "Aa" in Helvetica (poppler loads its fonts for it), written out
    /// whole with its cross-reference table (byte offsets): the product carries no PDF writer
    /// (the tests' is RenderingFixtures' `TestDocuments`).
    private static let pdfWithText: [UInt8] = Array([
        "%PDF-1.4",
        "1 0 obj",
        "<< /Type /Catalog /Pages 2 0 R >>",
        "endobj",
        "2 0 obj",
        "<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        "endobj",
        "3 0 obj",
        "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 32 16] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
        "endobj",
        "4 0 obj",
        "<< /Length 31 >>",
        "stream",
        "BT /F1 12 Tf 2 10 Td (Aa) Tj ET",
        "endstream",
        "endobj",
        "5 0 obj",
        "<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        "endobj",
        "xref",
        "0 6",
        "0000000000 65535 f ",
        "0000000009 00000 n ",
        "0000000058 00000 n ",
        "0000000115 00000 n ",
        "0000000239 00000 n ",
        "0000000320 00000 n ",
        "trailer",
        "<< /Size 6 /Root 1 0 R >>",
        "startxref",
        "390",
        "%%EOF",
        "",
    ].joined(separator: "\n").utf8)
}
