/// How much of the decoders' sandbox (`WorkerSandbox`) the daemon puts on its workers: the
/// `sandbox` setting (`--sandbox`, `sandbox =` in the config file; never the environment).
///
/// Anything but `on` weakens the boundary between a hostile file and the daemon's user, so it
/// is written where an administrator reads it, logged as a warning at start, and reported in
/// STATS (`sandbox_setting`, `statsValue`) and `viewerctl status`. Here, beside the wire, so
/// that the daemon and its clients read that value alike.
///
/// ```swift
/// SandboxSetting(name: "no-read-kill")   // .noReadKill
/// SandboxSetting.off.statsValue          // 2
/// ```
public enum SandboxSetting: Sendable, CaseIterable {
    /// Everything the kernel offers: namespaces, Landlock, the seccomp filter, and the
    /// daemon's check of each read-only open (one outside the view is refused, logged once
    /// per path and counted; since issue 29 it no longer kills the worker).
    case on
    /// The same, without the daemon's check of opens: Landlock alone refuses a read outside
    /// the view (EACCES), unlogged. For measuring that check's cost (BENCHMARKS.md); the name
    /// is from when the check killed.
    case noReadKill
    /// No namespaces, no Landlock, no filter: only the resource limits. For measuring the
    /// sandbox's cost, or a kernel where it cannot start.
    case off

    /// The spelling in the config file, on the command line and on the worker's.
    public var name: String {
        switch self {
        case .on: "on"
        case .noReadKill: "no-read-kill"
        case .off: "off"
        }
    }

    public init?(name: String) {
        guard let setting = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = setting
    }

    /// STATS `sandbox_setting`: 0 for `on`, so that a daemon that does not send it reads as on.
    public var statsValue: UInt64 {
        switch self {
        case .on: 0
        case .noReadKill: 1
        case .off: 2
        }
    }

    /// The setting a STATS `sandbox_setting` value names; nil for a value of a later version.
    public init?(statsValue: UInt64) {
        guard let setting = Self.allCases.first(where: { $0.statsValue == statsValue }) else { return nil }
        self = setting
    }
}
