import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport

extension HostileFiles {
    /// A decoder that tries to have the kernel signal the daemon (review 8439786 #2): the
    /// probe worker of viewerd-testing, given `probe-fcntl-setown.png`, asks F_SETOWN (the
    /// daemon's pid), F_SETSIG (SIGKILL), O_ASYNC and F_SETLEASE on its channel and reports each
    /// outcome in its error. Each must fail with EINVAL, no worker may be killed for it, and
    /// the daemon must answer the next request over the same worker's channel. Reports how many
    /// of the commands were refused.
    func fcntlArming() {
        let commands = ["F_SETOWN", "F_SETSIG", "O_ASYNC", "F_SETLEASE"]
        let path = context.work + "/faults/probe-fcntl-setown.png"
        report.cases()
        do {
            let killsBefore = try daemonStats()["sandbox_kills"] ?? 0
            let wire = try RawSocket.greeted(path: daemon.socketPath, name: "fcntl-arming")
            defer { wire.close() }
            try wire.send(.render(RenderRequest(path: path, spec: RenditionSpec(width: 64, height: 64))), id: 1)
            guard let answer = try awaitTerminal(wire, id: 1) else {
                report.violation("fcntl arming: no answer within \(bound.seconds) s")
                return
            }
            report.answer(answer.outcome)
            guard case .error(let error) = answer, error.message.contains("probe-fcntl-setown:") else {
                report.violation("fcntl arming: answered \(answer.outcome), expected the probe's report")
                return
            }
            let refused = commands.filter { error.message.contains("\($0) Invalid argument") }
            if refused.count != commands.count {
                report.violation("fcntl arming: only \(refused.count) of \(commands.count) commands refused: \(error.message)")
            }
            // The daemon writes to its workers again: were SIGKILL armed, this is where it would die.
            let good = context.work + "/faults/after-fcntl.png"
            try ImageFixtures.write(path: good, pixels: Context.pattern(width: 200, height: 150, seed: 8), width: 200,
                                    height: 150, bands: 3)
            try wire.send(.render(RenderRequest(path: good, spec: RenditionSpec(width: 64, height: 64))), id: 2)
            guard let next = try awaitTerminal(wire, id: 2), case .result = next else {
                report.violation("fcntl arming: the daemon did not render a good file after the probe")
                context.ensureAlive(daemon, after: "a decoder's fcntl arming")
                return
            }
            let kills = (try daemonStats()["sandbox_kills"] ?? 0) - killsBefore
            if kills != 0 { report.violation("fcntl arming: \(kills) worker(s) killed by the sandbox for it") }
            report.info("fcntl F_SETOWN/F_SETSIG/O_ASYNC/F_SETLEASE on the worker's channel: \(refused.count) of " +
                        "\(commands.count) refused (EINVAL), \(kills) sandbox kills, daemon alive")
        } catch {
            report.violation("fcntl arming: \(error)")
            context.ensureAlive(daemon, after: "a decoder's fcntl arming")
        }
    }

    private func daemonStats() throws -> StatsReply {
        let wire = try RawSocket.greeted(path: daemon.socketPath, name: "fcntl-arming-stats")
        defer { wire.close() }
        try wire.send(.stats, id: 1)
        guard let answer = try awaitTerminal(wire, id: 1), case .statsReply(let stats) = answer else {
            throw WireError.protocolError("no STATS answer")
        }
        return stats
    }
}
