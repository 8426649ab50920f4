import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport

extension HostileFiles {
    /// INFO of a file rewritten in place with the same size and its modification time put
    /// back (review 8439786 #4): the identity is unchanged, only the change time and the
    /// content tell. After the rewrite INFO must answer the new file's size, whether it comes
    /// first (odd rounds) or after a RENDER of the new content (even rounds); and again, from
    /// the store. Reports how many rounds answered the new size.
    func infoRewrites() {
        let dir = context.work + "/info-rewrite"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let pair: ([UInt8], [UInt8])
        do {
            let (wide, tall) = (dir + "/wide.png", dir + "/tall.png")
            try ImageFixtures.write(path: wide, pixels: Context.pattern(width: 300, height: 200, seed: 11), width: 300,
                                    height: 200, bands: 3)
            try ImageFixtures.write(path: tall, pixels: Context.pattern(width: 200, height: 300, seed: 12), width: 200,
                                    height: 300, bands: 3)
            pair = try PNGPadding.sameSize(Array(try Data(contentsOf: URL(fileURLWithPath: wide))),
                                           Array(try Data(contentsOf: URL(fileURLWithPath: tall))))
        } catch {
            report.violation("cannot write the INFO-rewrite fixtures: \(error)")
            return
        }
        var followed = 0
        for round in 0..<context.scale.rewriteRounds {
            report.cases()
            do {
                if try infoRewrite(round, path: "\(dir)/i\(round).png", pair, renderFirst: round % 2 == 0) { followed += 1 }
            } catch {
                report.violation("INFO rewrite \(round): \(error)")
                context.ensureAlive(daemon, after: "an INFO rewrite")
            }
        }
        report.info("INFO after a same-size rewrite with mtime put back: \(followed) of \(context.scale.rewriteRounds) " +
                    "rounds answered the new file")
    }

    /// One round; true when every INFO after the rewrite answered 200x300.
    private func infoRewrite(_ round: Int, path: String, _ pair: ([UInt8], [UInt8]), renderFirst: Bool) throws -> Bool {
        let file = try SameIdentityRewrite(path, first: pair.0)
        let wire = try RawSocket.greeted(path: daemon.socketPath, name: "info-rewrite")
        defer { wire.close() }
        var id: UInt32 = 0
        func ask(_ message: Message) throws -> Message {
            id += 1
            try wire.send(message, id: id)
            guard let answer = try awaitTerminal(wire, id: id) else { throw WireError.protocolError("no answer within \(bound.seconds) s") }
            report.answer(answer.outcome)
            return answer
        }
        func size(_ answer: Message) -> String {
            if case .infoReply(let info) = answer { return "\(info.width)x\(info.height)" }
            return answer.outcome
        }
        let first = try ask(.info(InfoRequest(path: path)))
        guard size(first) == "300x200" else {
            report.violation("INFO rewrite \(round): before the rewrite INFO answered \(size(first)), expected 300x200")
            return false
        }
        guard try file.rewrite(with: pair.1) else {
            report.note("INFO rewrite \(round): the rewrite changed the file's identity; nothing to check")
            return true
        }
        if renderFirst {
            let rendered = try ask(.render(RenderRequest(path: path, spec: RenditionSpec(width: 100, height: 100))))
            guard case .result(let r) = rendered, r.width < r.height else {
                report.violation("INFO rewrite \(round): the RENDER after the rewrite got \(rendered.outcome), expected the 200x300 file")
                return false
            }
        }
        for again in 0..<2 {
            let answer = try ask(.info(InfoRequest(path: path)))
            guard size(answer) == "200x300" else {
                report.violation("INFO rewrite \(round)\(renderFirst ? " (after a RENDER)" : ""): INFO #\(again + 1) after the " +
                                 "rewrite answered \(size(answer)), expected the new 200x300")
                return false
            }
        }
        return true
    }
}
