import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The whole run: prepares, runs the phases in order, prints the summary.
struct TortureRun {
    let settings: Settings

    func run() -> Int32 {
        let started = ContinuousClock.now
        let context: Context
        do {
            context = try Context(settings: settings)
            emit("viewerd-torture (\(settings.short ? "short" : "full")): viewerd \(context.viewerd), work \(context.work), " +
                  "seed \(settings.seed), \(context.isRoot ? "as root" : "as uid \(getuid())")")
            try context.makeFixtures()
        } catch {
            FileHandle.standardError.write(Data("viewerd-torture: cannot prepare: \(error)\n".utf8))
            return 2
        }
        let report = context.report
        let main = context.makeMainDaemon()
        let needsMain = !settings.phases.isDisjoint(with: ["files", "clients", "load", "http"])
        if needsMain {
            do { try main.start() } catch {
                report.violation("the daemon does not start: \(error)")
                return summary(context, started: started)
            }
        }
        if settings.phases.contains("files") { HostileFiles(context, daemon: main).run() }
        if settings.phases.contains("clients") { HostileClients(context, daemon: main).run() }
        if settings.phases.contains("load") { Load(context, daemon: main).run() }
        if settings.phases.contains("http") {
            do { try HostileHTTP(context, daemon: main).run() } catch { report.violation("the http phase cannot prepare its files: \(error)") }
        }
        if needsMain {
            context.ensureAlive(main, after: "at the end")
            // A clean stop: everything answered, the store flushed, status 0.
            let status = main.stop()
            if status != 0 { report.violation("the daemon exited with status \(status) on SIGTERM; log:\n\(main.logTail())") }
        }
        if settings.phases.contains("faults") { Faults(context).run() }
        if settings.phases.contains("multi-user") { MultiUser(context).run() }
        return summary(context, started: started)
    }

    private func summary(_ context: Context, started: ContinuousClock.Instant) -> Int32 {
        let report = context.report
        let elapsed = (ContinuousClock.now - started).seconds
        emit("")
        emit("== summary (\(settings.short ? "short" : "full"), \(String(format: "%.0f", elapsed)) s, seed \(settings.seed))")
        emit(pad("phase", 18) + pad("cases", 8, right: true) + pad("violations", 12, right: true) + pad("seconds", 10, right: true))
        var totalCases = 0
        for phase in report.phases {
            totalCases += phase.cases
            emit(pad(phase.name, 18) + pad("\(phase.cases)", 8, right: true) + pad("\(phase.violations)", 12, right: true)
                 + pad(String(format: "%.1f", phase.seconds), 10, right: true))
        }
        emit(pad("total", 18) + pad("\(totalCases)", 8, right: true) + pad("\(report.violationCount)", 12, right: true))
        let answers = report.answers.sorted { $0.value > $1.value }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        emit("answers by code: \(answers)")
        emit("crashes: daemon \(report.daemonCrashes); decoder-crashed answers \(report.decoderCrashAnswers) " +
              "(workers killed by the torture run: \(report.workersKilledByTorture)); timeout answers \(report.timeoutAnswers)")
        emit("lost requests: \(report.lost), duplicated terminal answers: \(report.duplicated), answers to no request: \(report.spurious)")
        emit("peak memory: daemon \(report.peakDaemonKiB / 1024) MiB (limit \(settings.rssLimitMiB) MiB), " +
              "largest worker \(report.peakWorkerKiB / 1024) MiB; slowest bystander answer " +
              String(format: "%.2f s", report.maxBystanderLatency.seconds))
        if !report.notes.isEmpty {
            emit("notes:")
            for note in report.notes { emit("  - \(note)") }
        }
        if report.violations.isEmpty {
            emit("violations: none")
        } else {
            emit("violations (\(report.violations.count)):")
            for v in report.violations { emit("  - \(v)") }
        }
        if !settings.keep && report.violations.isEmpty && settings.workDirectory == nil {
            // Let the unprivileged cases' files go too.
            _ = chmod(context.work + "/hostile/locked", 0o755)
            try? FileManager.default.removeItem(atPath: context.work)
        } else {
            emit("work directory kept: \(context.work)")
        }
        return report.violations.isEmpty ? 0 : 1
    }
}

/// `text` padded with spaces to `width` columns, on the left when `right`.
func pad(_ text: String, _ width: Int, right: Bool = false) -> String {
    let fill = String(repeating: " ", count: max(0, width - text.count))
    return right ? fill + text : text + fill
}
