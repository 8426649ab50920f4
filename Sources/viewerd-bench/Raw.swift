import Foundation
import Rendering
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport

/// Camera RAW (issue 31): a 24 MP DNG's 256-pixel thumbnail from its embedded JPEG preview
/// (1620x1080, a Canon-sized one), against LibRaw's own full decode of the same file
/// (`dcraw_emu`, Debian's libraw-bin) in the same run; and a half-size development, of the
/// same sensor without a preview, against `dcraw_emu -h`. One request at a time, each a new
/// copy of the file (a new identity), on a daemon whose workers have started.
extension Bench {
    static let rawSensor = (width: 6000, height: 4000)

    func raw() throws {
        let directory = workDirectory + "/raw"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (w, h) = settings.smoke ? (600, 400) : Self.rawSensor
        let previewSize = settings.smoke ? (162, 108) : (1620, 1080)
        let jpegPath = directory + "/preview.jpg"
        try ImageFixtures.write(path: jpegPath, pixels: RawFiles.picturePixels(width: previewSize.0, height: previewSize.1),
                                width: previewSize.0, height: previewSize.1, bands: 3, options: "Q=90")
        let jpeg = Array(try Data(contentsOf: URL(fileURLWithPath: jpegPath)))
        let withPreview = directory + "/preview.dng", bare = directory + "/bare.dng"
        try Data(RawFiles.dng(RawFiles.Layout(width: w, height: h, jpegPreview: jpeg, bitmapPreview: (256, 171))))
            .write(to: URL(fileURLWithPath: withPreview))
        try Data(RawFiles.dng(RawFiles.Layout(width: w, height: h))).write(to: URL(fileURLWithPath: bare))

        let daemon = try startDaemon("raw")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-raw")
        defer { socket.shutdown() }
        var id: UInt32 = 0
        func timed(_ path: String, box: UInt32) throws -> Double {
            id += 1
            let started = now()
            try socket.write(renderFrame(path, spec: RenditionSpec(width: box, height: box), id: id))
            while true {
                let frame = try socket.readFrame()
                guard frame.requestID == id, frame.messageType != .preview else { continue }
                guard frame.messageType == .result else { throw BenchError("\(path): \(try frame.message())") }
                return Double(now() - started) / 1e6
            }
        }
        // The workers' start-up and the files' first read, paid before (boxes not measured).
        _ = try timed(withPreview, box: 100)
        _ = try timed(bare, box: 100)
        // Each measured render is of a copy of its own (a new identity): a smaller box of a file
        // already rendered would be derived from the stored rendition, not decoded.
        func copies(_ path: String, _ count: Int) throws -> [String] {
            try (0..<count).map { i in
                let copy = "\(path).\(i).dng"
                try FileManager.default.copyItem(atPath: path, toPath: copy)
                return copy
            }
        }
        let runs = settings.smoke ? 3 : 9
        let previewTimes = try copies(withPreview, runs).map { try timed($0, box: 256) }
        let halfTimes = try copies(bare, min(runs, 5)).map { try timed($0, box: 256) }

        func dcraw(_ arguments: [String], threads: Int? = nil) -> Double {
            let started = now()
            _ = spawnAndWait((threads.map { ["env", "OMP_NUM_THREADS=\($0)"] } ?? []) + ["dcraw_emu"] + arguments)
            return Double(now() - started) / 1e6
        }
        let full = median((0..<3).map { _ in dcraw(["-w", withPreview]) })
        let half = median((0..<min(runs, 5)).map { _ in dcraw(["-w", "-h", bare]) })
        // The workers run OpenMP with one thread (a job is one core); dcraw_emu uses every core.
        let halfOneThread = median((0..<min(runs, 5)).map { _ in dcraw(["-w", "-h", bare], threads: 1) })
        let p50 = median(previewTimes), halfP50 = median(halfTimes)
        report.add(Row(scenario: "raw", figure: "24 MP DNG, 256 px thumbnail from its embedded preview: p50 of \(runs)",
                       value: "\(fmt(p50, 1)) ms", baseline: "", ratio: "", goal: "<= 30 ms", pass: p50 <= 30))
        report.add(Row(scenario: "raw", figure: "the same against LibRaw's full decode of the file (speed-up)",
                       value: "\(fmt(full / p50, 1))x", baseline: "dcraw_emu -w \(fmt(full, 0)) ms", ratio: fmt(p50 / full, 3),
                       goal: ">= 20x", pass: full / p50 >= 20))
        report.add(Row(scenario: "raw", figure: "24 MP DNG without preview, 256 px thumbnail (half-size development): p50",
                       value: "\(fmt(halfP50, 0)) ms", baseline: "dcraw_emu -w -h \(fmt(half, 0)) ms", ratio: fmt(halfP50 / half),
                       goal: "<= 1.10", pass: halfP50 / half <= 1.1))
        report.add(Row(scenario: "raw", figure: "the same half-size development against dcraw_emu on one OpenMP thread, as a worker",
                       value: "\(fmt(halfP50, 0)) ms", baseline: "OMP_NUM_THREADS=1 dcraw_emu -w -h \(fmt(halfOneThread, 0)) ms",
                       ratio: fmt(halfP50 / halfOneThread), goal: "", pass: nil))
        report.results["raw"] = ["preview_ms": previewTimes, "half_size_ms": halfTimes, "dcraw_emu_full_ms": full,
                                 "dcraw_emu_half_ms": half, "dcraw_emu_half_one_thread_ms": halfOneThread, "sensor": [w, h], "preview": [previewSize.0, previewSize.1]]
    }
}
