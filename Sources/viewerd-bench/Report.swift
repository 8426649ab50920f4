import Foundation
import SystemCalls
#if canImport(Glibc)
import Glibc
#endif

/// Progress goes straight to standard output, unbuffered, so `make bench` shows it as it
/// happens (Swift's `print` buffers when the output is a pipe).
func print(_ item: Any = "", terminator: String = "\n") {
    // A closed standard output is not worth failing the run for.
    try? Posix.writeAll(1, Array("\(item)\(terminator)".utf8))
}

/// Nearest-rank percentile of nanosecond samples, in milliseconds; +inf samples count as such.
func percentile(_ samples: [Double], _ q: Double) -> Double {
    guard !samples.isEmpty else { return .nan }
    let sorted = samples.sorted()
    let rank = max(0, min(sorted.count - 1, Int((q * Double(sorted.count)).rounded(.up)) - 1))
    return sorted[rank]
}

func median(_ values: [Double]) -> Double {
    guard !values.isEmpty else { return .nan }
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

func seconds(_ nanos: UInt64) -> Double { Double(nanos) / 1e9 }

func fmt(_ value: Double, _ digits: Int = 2) -> String {
    if value.isNaN { return "n/a" }
    if value.isInfinite { return value > 0 ? "inf" : "-inf" }
    return String(format: "%.\(digits)f", value)
}

func mib(_ bytes: UInt64) -> String { String(format: "%.0f MiB", Double(bytes) / 1048576) }

/// A JSON-safe number (JSON has no infinity or NaN).
func json(_ value: Double) -> Any { value.isFinite ? value : NSNull() }

/// One line of the summary table.
struct Row {
    var scenario: String
    var figure: String
    var value: String
    var baseline: String
    var ratio: String
    var goal: String
    /// nil: informational, no goal.
    var pass: Bool?
}

/// The table, the goals and the timings, printed and written as JSON.
final class Report: @unchecked Sendable {
    private(set) var rows: [Row] = []
    var results: [String: Any] = [:]
    var timings: [(String, Double)] = []

    func add(_ row: Row) {
        rows.append(row)
        let verdict = row.pass.map { $0 ? "PASS" : "MISS" } ?? ""
        print("  \(row.figure): \(row.value)" + (row.baseline.isEmpty ? "" : "  | baseline \(row.baseline)")
              + (row.ratio.isEmpty ? "" : "  | ratio \(row.ratio)") + (row.goal.isEmpty ? "" : "  | goal \(row.goal)")
              + (verdict.isEmpty ? "" : "  \(verdict)"))
    }

    /// How busy the whole machine was during each part (every process, the bench's included),
    /// and the load average at its end: these machines are shared, and the figures move with it.
    var machineLoad: [String: [String: Any]] = [:]

    /// Times a part of the run and records it.
    func part<T>(_ name: String, _ body: () throws -> T) rethrows -> T {
        print("\n== \(name)")
        let started = now()
        let cpuBefore = Self.cpuTicks()
        let value = try body()
        let elapsed = seconds(now() - started)
        let cpuAfter = Self.cpuTicks()
        let busy = cpuAfter.total > cpuBefore.total
            ? Double(cpuAfter.busy - cpuBefore.busy) / Double(cpuAfter.total - cpuBefore.total) : .nan
        let load = Self.loadAverage()
        timings.append((name, elapsed))
        machineLoad[name] = ["cpu_busy_fraction": json(busy), "loadavg_1min_end": load]
        print("   (\(name): \(fmt(elapsed, 1)) s; machine CPU busy \(fmt(busy * 100, 0)) %, load average \(fmt(load, 2)))")
        return value
    }

    /// Busy and total jiffies of all CPUs, from the first line of /proc/stat.
    static func cpuTicks() -> (busy: UInt64, total: UInt64) {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first else { return (0, 0) }
        let values = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard values.count >= 5 else { return (0, 0) }
        let total = values.prefix(8).reduce(0, +)
        return (total - values[3] - values[4], total)  // idle and iowait are not busy
    }

    static func loadAverage() -> Double {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        return Double(text.split(separator: " ").first ?? "") ?? .nan
    }

    func printTable() {
        let headers = Row(scenario: "scenario", figure: "figure", value: "viewerd", baseline: "baseline", ratio: "ratio",
                          goal: "goal", pass: nil)
        let all = [headers] + rows
        func width(_ key: KeyPath<Row, String>) -> Int { all.map { $0[keyPath: key].count }.max() ?? 0 }
        let w = [width(\.scenario), width(\.figure), width(\.value), width(\.baseline), width(\.ratio), width(\.goal)]
        func pad(_ s: String, _ n: Int) -> String { s + String(repeating: " ", count: max(0, n - s.count)) }
        for (index, row) in all.enumerated() {
            let verdict = index == 0 ? "result" : (row.pass.map { $0 ? "PASS" : "MISS" } ?? "")
            print([pad(row.scenario, w[0]), pad(row.figure, w[1]), pad(row.value, w[2]), pad(row.baseline, w[3]),
                   pad(row.ratio, w[4]), pad(row.goal, w[5]), verdict].joined(separator: "  "))
        }
    }

    func goals() -> (met: Int, missed: Int) {
        (rows.filter { $0.pass == true }.count, rows.filter { $0.pass == false }.count)
    }

    func document(extra: [String: Any]) -> Any {
        var out = extra
        out["results"] = results
        out["table"] = rows.map { row -> [String: Any] in
            var r: [String: Any] = ["scenario": row.scenario, "figure": row.figure, "value": row.value,
                                    "baseline": row.baseline, "ratio": row.ratio, "goal": row.goal]
            r["verdict"] = row.pass.map { $0 ? "PASS" : "MISS" } ?? NSNull()
            return r
        }
        out["timings_seconds"] = Dictionary(uniqueKeysWithValues: timings.map { ($0.0, $0.1) })
        out["timing_order"] = timings.map(\.0)
        out["machine_load_by_part"] = machineLoad
        let g = goals()
        out["goals_met"] = g.met
        out["goals_missed"] = g.missed
        return out
    }
}
