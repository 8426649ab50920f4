import Locking
import ViewerProtocol

/// viewerd-http's counters, and their OpenMetrics text (`/metrics`, for Prometheus and its kin).
///
/// Families: `viewerd_http_requests` (counter, by route and status), `viewerd_http_request_duration_seconds`
/// (histogram, by route), `viewerd_http_response_bytes` (counter), `viewerd_http_renditions`
/// (counter, by source: cache or rendered), `viewerd_http_remembered` (counter: answers sent
/// again from the front's memory), `viewerd_http_memory_bytes`, `viewerd_daemon_up` and one gauge
/// `viewerd_daemon_NAME` for each of the daemon's STATS counters. `state` (a `Locked`) holds
/// them all.
final class Metrics: Sendable {
    /// The histogram's upper bounds, in seconds: a warm tile is about a millisecond, a cold
    /// 24 MP JPEG a second or more.
    static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    struct Histogram {
        var counts = [UInt64](repeating: 0, count: Metrics.bounds.count)
        var count: UInt64 = 0
        var sum: Double = 0
    }

    struct RouteStatus: Hashable, Comparable {
        var route: String
        var status: String
        static func < (a: Self, b: Self) -> Bool { (a.route, a.status) < (b.route, b.status) }
    }

    struct State {
        var requests: [RouteStatus: UInt64] = [:]
        var durations: [String: Histogram] = [:]
        var bytes: UInt64 = 0
        var fromCache: UInt64 = 0
        var rendered: UInt64 = 0
        var remembered: UInt64 = 0
    }

    private let state = Locked<State>(State())

    /// One request's end. `status` nil: no response was sent (the client went away).
    func record(route: String, status: Int?, bytes: Int, duration: Duration) {
        let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        state.withLock { state in
            state.requests[RouteStatus(route: route, status: status.map(String.init) ?? "none"), default: 0] += 1
            var histogram = state.durations[route] ?? Histogram()
            if let bucket = Self.bounds.firstIndex(where: { seconds <= $0 }) { histogram.counts[bucket] += 1 }
            histogram.count += 1
            histogram.sum += seconds
            state.durations[route] = histogram
            state.bytes += UInt64(bytes)
        }
    }

    /// A rendition answered: from the daemon's store, or rendered for this request.
    func recordRendition(fromCache: Bool) {
        state.withLock { state in
            if fromCache { state.fromCache += 1 } else { state.rendered += 1 }
        }
    }

    /// An answer the front kept, sent again without asking the daemon.
    func recordRemembered() {
        state.withLock { $0.remembered += 1 }
    }

    /// The OpenMetrics text of every family, the daemon's counters (nil: it did not answer)
    /// included, ending in `# EOF`.
    func text(daemon: StatsReply?, memory: (bytes: Int, entries: Int) = (0, 0)) -> String {
        let state = state.withLock { $0 }
        var out = ""
        out += "# TYPE viewerd_http_requests counter\n"
        out += "# HELP viewerd_http_requests Requests answered, by route and status (none: the client went away first).\n"
        for (key, count) in state.requests.sorted(by: { $0.key < $1.key }) {
            out += "viewerd_http_requests_total{route=\"\(Self.escape(key.route))\",status=\"\(key.status)\"} \(count)\n"
        }
        out += "# TYPE viewerd_http_request_duration_seconds histogram\n"
        out += "# HELP viewerd_http_request_duration_seconds From a request's headers to its response's end, by route.\n"
        for (route, histogram) in state.durations.sorted(by: { $0.key < $1.key }) {
            let label = "route=\"\(Self.escape(route))\""
            var cumulative: UInt64 = 0
            for (bound, count) in zip(Self.bounds, histogram.counts) {
                cumulative += count
                out += "viewerd_http_request_duration_seconds_bucket{\(label),le=\"\(bound)\"} \(cumulative)\n"
            }
            out += "viewerd_http_request_duration_seconds_bucket{\(label),le=\"+Inf\"} \(histogram.count)\n"
            out += "viewerd_http_request_duration_seconds_sum{\(label)} \(histogram.sum)\n"
            out += "viewerd_http_request_duration_seconds_count{\(label)} \(histogram.count)\n"
        }
        out += "# TYPE viewerd_http_response_bytes counter\n"
        out += "# HELP viewerd_http_response_bytes Bytes of response bodies sent.\n"
        out += "viewerd_http_response_bytes_total \(state.bytes)\n"
        out += "# TYPE viewerd_http_renditions counter\n"
        out += "# HELP viewerd_http_renditions Renditions answered, from the daemon's store or rendered for the request.\n"
        out += "viewerd_http_renditions_total{source=\"cache\"} \(state.fromCache)\n"
        out += "viewerd_http_renditions_total{source=\"rendered\"} \(state.rendered)\n"
        out += "# TYPE viewerd_http_remembered counter\n"
        out += "# HELP viewerd_http_remembered Answers sent again from the front's memory (--memory-cache), without asking the daemon.\n"
        out += "viewerd_http_remembered_total \(state.remembered)\n"
        out += "# TYPE viewerd_http_memory_bytes gauge\n"
        out += "# HELP viewerd_http_memory_bytes The bodies' bytes of the answers the front keeps.\n"
        out += "viewerd_http_memory_bytes \(memory.bytes)\n"
        out += "# TYPE viewerd_daemon_up gauge\n"
        out += "# HELP viewerd_daemon_up Whether the daemon answered STATS for this scrape.\n"
        out += "viewerd_daemon_up \(daemon == nil ? 0 : 1)\n"
        for (name, value) in daemon?.counters ?? [] {
            let family = "viewerd_daemon_" + Self.metricName(name)
            out += "# TYPE \(family) gauge\n"
            out += "\(family) \(value)\n"
        }
        out += "# EOF\n"
        return out
    }

    /// A STATS counter's name as a metric name: letters, digits and `_` (others become `_`).
    static func metricName(_ name: String) -> String {
        String(name.unicodeScalars.map { scalar in
            switch scalar {
            case "a"..."z", "A"..."Z", "0"..."9", "_": Character(scalar)
            default: "_"
            }
        })
    }

    /// A label value with `\`, `"` and line feeds escaped, as OpenMetrics wants.
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
            .replacingOccurrences(of: "\n", with: "\\n")
    }
}
