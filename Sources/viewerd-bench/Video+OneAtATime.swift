import Foundation
import ViewerProtocol
import ViewerTestSupport

/// Where the cold posters' time goes: each clip alone, one at a time, on a fresh daemon whose
/// workers have started, beside `ffmpegthumbnailer` on the same clip alone. Informational (the
/// goal is the pipelined wall time), printed by codec and written per clip to the JSON, so that
/// a miss points at a codec or a size rather than at the whole set.
extension Bench {
    func videoOneAtATime(_ clips: [String], infos: [Corpus.ClipInfo?]) throws -> [[String: Any]] {
        let directory = workDirectory + "/video-one-at-a-time"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let daemon = try startDaemon("video-one-at-a-time")
        defer { daemon.stop() }
        // Each worker's start-up is paid before, on copies (a copy is its own identity: the
        // clips themselves stay cold).
        let warmUp = try (0..<settings.workers).map { i -> String in
            let copy = "\(directory)/warm-\(i).\((clips[i % clips.count] as NSString).pathExtension)"
            try FileManager.default.copyItem(atPath: clips[i % clips.count], toPath: copy)
            return copy
        }
        _ = try renderAll(warmUp, daemon: daemon, clients: settings.workers)
        let socket = try daemon.rawConnection(name: "bench-one-at-a-time")
        defer { socket.shutdown() }
        var rows: [[String: Any]] = []
        var byCodec: [String: (viewerd: Double, baseline: Double, count: Int)] = [:]
        for (i, clip) in clips.enumerated() {
            let id = UInt32(i + 1)
            let started = now()
            try socket.write(renderFrame(clip, id: id))
            var error: String?
            while true {
                let frame = try socket.readFrame()
                guard frame.requestID == id, frame.messageType != .preview else { continue }
                if frame.messageType != .result { error = "\(try frame.message())" }
                break
            }
            let viewerd = Double(now() - started) / 1e6
            let baselineStarted = now()
            let baseline = spawnAndWait(["ffmpegthumbnailer", "-i", clip, "-o", "\(directory)/\(i).jpg", "-s", "256", "-q", "8"])
            let baselineMs = Double(now() - baselineStarted) / 1e6
            let codec = infos[i]?.codec ?? "?"
            let name = (clip as NSString).lastPathComponent
            if error == nil && baseline.status == 0 {
                var sum = byCodec[codec] ?? (0, 0, 0)
                sum.viewerd += viewerd; sum.baseline += baselineMs; sum.count += 1
                byCodec[codec] = sum
            }
            rows.append(["file": name, "codec": codec, "viewerd_ms": viewerd, "ffmpegthumbnailer_ms": baselineMs,
                         "ffmpegthumbnailer_cpu_s": baseline.cpu, "error": error ?? NSNull()])
            if let error { print("  \(name): \(error)") }
        }
        let lines = byCodec.sorted { $0.key < $1.key }.map { codec, sum in
            "\(codec) \(sum.count): \(fmt(sum.viewerd / Double(sum.count), 0))/\(fmt(sum.baseline / Double(sum.count), 0)) ms (\(fmt(sum.viewerd / sum.baseline)))"
        }
        print("  one at a time, mean viewerd/ffmpegthumbnailer by codec: " + lines.joined(separator: ", "))
        return rows
    }
}
