import Foundation
import SystemCalls
import ViewerLog

/// SIGHUP: the configuration read again, its run-time settings applied on the loop thread.
extension Daemon {
    /// Reads the settings again from the same layers (the config file, the environment the
    /// daemon started with, its flags) and applies what changed among the `reloadable` ones;
    /// a changed setting that needs a restart is logged as such and left as it runs. A file
    /// that does not parse changes nothing: the error is logged and the daemon serves on.
    ///
    /// Log lines: one `event=setting-needs-restart` per changed setting read at start only,
    /// one `event=setting-changed` per setting applied, then `event=reloaded`.
    func reload() {
        guard !shuttingDown else { return }
        guard let reread else {
            Log.info("event=reload-ignored detail=\"no settings to read again\"")
            return
        }
        service.reloading()
        defer { service.reloaded(status: statusLine()) }
        let fresh: Configuration
        do throws(ConfigError) {
            fresh = try reread().configuration
        } catch {
            Log.error("event=reload-failed error=\(Log.quote(error.description)) " +
                      "detail=\"the running configuration stays\"")
            return
        }
        var (reloadable, restartOnly) = SettingKey.changes(from: requested, to: fresh)
        // Roots that did not open (a mount not up yet) are tried again, the list unchanged.
        if !reloadable.contains(.sharedRoots), opener.access.roots.count != fresh.sharedRoots.count {
            reloadable = SettingKey.allCases.filter { $0 == .sharedRoots || reloadable.contains($0) }
        }
        // A more talkative level first, so that its own line is let out; a quieter one last.
        if reloadable.contains(.logLevel) { Log.setThreshold(min(fresh.logLevel, requested.logLevel)) }
        for key in restartOnly {
            Log.warning("event=setting-needs-restart setting=\(key.rawValue) running=\(Log.quote(key.format(requested))) " +
                        "configured=\(Log.quote(key.format(fresh))) detail=\"takes effect at restart\"")
        }
        var applied: [String] = []
        for key in reloadable {
            let from = key.format(requested)
            guard apply(key, fresh) else { continue }
            Log.info("event=setting-changed setting=\(key.rawValue) from=\(Log.quote(from)) to=\(Log.quote(key.format(fresh)))")
            applied.append(key.rawValue)
        }
        let needRestart = restartOnly.map(\.rawValue)
        Log.info("event=reloaded changed=\(Log.quote(applied.joined(separator: ","))) " +
                 "restart_needed=\(Log.quote(needRestart.joined(separator: ",")))")
        if applied.contains(SettingKey.logLevel.rawValue) { Log.setThreshold(fresh.logLevel) }
    }

    /// Whether this process has a controlling terminal: `tty_nr`, the 7th field of
    /// /proc/self/stat, is not 0. Asked at start: a hangup takes the terminal away from the
    /// whole session before its SIGHUP is read.
    static func hasControllingTerminal() -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return false }
        // After the name: state, ppid, pgrp, session, tty_nr.
        let fields = stat[stat.index(after: end)...].split(separator: " ")
        return fields.count > 4 && fields[4] != "0"
    }

    /// Puts one reloadable setting's new value in effect; false when it cannot be (logged),
    /// and the old one stays.
    private func apply(_ key: SettingKey, _ fresh: Configuration) -> Bool {
        switch key {
        case .logLevel: break  // set by `reload`, after its lines
        case .cacheBudget: store.setBudget(fresh.cacheBudgetBytes)
        case .memoryBudget: pool.setMemoryBudget(fresh.memoryBudget)
        case .sharedRoots:
            // As at start: the roots that open are served, each other one is logged.
            let roots = SharedRoot.openAll(fresh.sharedRoots)
            opener.access = SourceAccess(roots: roots)
            configuration.sharedRoots = roots.map(\.resolved)  // as served: resolved
        case .idleExit: service.idleExit = fresh.idleExit
        case .workerIdleExit: pool.setWorkerIdleExit(fresh.workerIdleExit)
        case .clientWriteTimeout: break  // read from `configuration` at each look
        case .maxConnectionsPerUser: connections.setMaxConnectionsPerUser(fresh.maxConnectionsPerUser)
        case .maxSourcesPerUser: sourceQuota.setLimit(fresh.maxSourcesPerUser)
        case .socket, .cacheDir, .workers, .jobTimeout, .maxPixels, .workerMemoryLimit, .socketGroup, .sandbox:
            preconditionFailure("\(key.rawValue) is read at start only")
        }
        // The value as served, and as the next reload compares with.
        if key != .sharedRoots { key.copy(from: fresh, to: &configuration) }
        key.copy(from: fresh, to: &requested)
        return true
    }
}
