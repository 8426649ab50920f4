import Foundation
import RenderingFixtures
import ViewerProtocol
import ViewerTestSupport

/// What one LAYOUT answered, as a viewer laying out its grid sees it: when each index had its
/// final item (media info or error, and its placeholder unless none is coming).
struct LayoutRun {
    /// ns from the LAYOUT sent to the final item of each index (nil: none came).
    var finalAt: [UInt64?]
    /// ns to each index's first item with a placeholder (nil: none).
    var placeholderAt: [UInt64?]
    var errors: [String]
    /// ns to the terminal answer.
    var ended: UInt64
    var frames: Int

    var placeholders: Int { placeholderAt.compactMap { $0 }.count }
    /// ns to the last index's final item (+inf when one never came).
    var toLast: Double { finalAt.contains(nil) ? .infinity : Double(finalAt.map { $0! }.max() ?? 0) }
    var toLastPlaceholder: Double { placeholderAt.contains(nil) ? .infinity : Double(placeholderAt.map { $0! }.max() ?? 0) }
}

/// Reads LAYOUT_ITEMS frames of request `id` until its ACK (or CANCELLED or ERROR); `onItem`
/// sees each item with the time it arrived (monotonic ns). Frames of other requests go to `other`.
func readLayout(_ socket: RawSocket, id: UInt32, count: Int, sentAt: UInt64,
                onItem: ((LayoutItem, UInt64) -> Void)? = nil, other: ((Frame) -> Void)? = nil) throws -> LayoutRun {
    var run = LayoutRun(finalAt: Array(repeating: nil, count: count), placeholderAt: Array(repeating: nil, count: count),
                        errors: [], ended: 0, frames: 0)
    while true {
        let frame = try socket.readFrame()
        let t = now()
        guard frame.requestID == id else { other?(frame); continue }
        run.frames += 1
        switch try frame.message() {
        case .layoutItems(let batch):
            for item in batch.items where Int(item.index) < count {
                let i = Int(item.index)
                onItem?(item, t)
                if case .failed(let error) = item.outcome, run.errors.count < 20 { run.errors.append("\(i): \(error.message)") }
                if item.info?.placeholder != nil, run.placeholderAt[i] == nil { run.placeholderAt[i] = t - sentAt }
                if item.isFinal, run.finalAt[i] == nil { run.finalAt[i] = t - sentAt }
            }
        case .ack, .cancelled:
            run.ended = t - sentAt
            return run
        case let other:
            throw BenchError("LAYOUT answered \(other)")
        }
    }
}

extension Bench {
    /// Sends a LAYOUT of `paths` and reads it to its end.
    func layout(_ paths: [String], on socket: RawSocket, id: UInt32 = 1) throws -> LayoutRun {
        let sent = now()
        try socket.send(.layout(LayoutRequest(paths: paths)), id: id)
        return try readLayout(socket, id: id, count: paths.count, sentAt: sent)
    }

    /// 14. Layout (issue 32): a window's media info and placeholders in one request. A cold
    /// folder of 500 phone photos (EXIF and HEIF thumbnails: placeholders without a decode of
    /// the photo), the same again with their info stored, and 10,000 small files, cold then stored.
    func layoutPart() throws {
        var results: [String: Any] = [:]
        let phoneRoot = settings.smoke ? workDirectory + "/phone-album" : corpus.root + "/phone-album"
        let phone = Array(try Corpus.phoneAlbum(library: corpus.library, in: phoneRoot, count: settings.fastScrollItems)
            .prefix(settings.layoutPhotos))
        let daemon = try startDaemon("layout")
        defer { daemon.stop() }
        let socket = try daemon.rawConnection(name: "bench-layout")
        defer { socket.shutdown() }
        if !phone.isEmpty {
            let cold = try layout(phone, on: socket, id: 1)
            let warm = try layout(phone, on: socket, id: 2)
            print("  \(phone.count) phone photos, cold: every item final in \(fmt(cold.toLast / 1e6, 0)) ms, \(cold.placeholders) placeholders, the last at \(fmt(cold.toLastPlaceholder / 1e6, 0)) ms, \(cold.frames) frames, \(cold.errors.count) errors; stored: \(fmt(warm.toLast / 1e6, 2)) ms to the last, \(warm.placeholders) placeholders")
            if !cold.errors.isEmpty { print("  first errors: \(cold.errors.prefix(3))") }
            report.add(Row(scenario: "layout", figure: "\(phone.count) phone photos, cold: every placeholder", value: "\(fmt(cold.toLastPlaceholder / 1e6, 0)) ms",
                           baseline: "\(cold.placeholders) of \(phone.count) placeholders", ratio: "", goal: "<= 2000 ms",
                           pass: cold.toLastPlaceholder <= 2e9))
            report.add(Row(scenario: "layout", figure: "\(phone.count) phone photos, info stored: to the last item", value: "\(fmt(warm.toLast / 1e6, 2)) ms",
                           baseline: "\(warm.placeholders) placeholders", ratio: "", goal: "<= 16 ms", pass: warm.toLast <= 16e6))
            results["phone"] = ["files": phone.count, "cold_to_last_ms": json(cold.toLast / 1e6),
                                "cold_to_last_placeholder_ms": json(cold.toLastPlaceholder / 1e6), "cold_placeholders": cold.placeholders,
                                "stored_to_last_ms": json(warm.toLast / 1e6), "stored_placeholders": warm.placeholders,
                                "errors": cold.errors] as [String: Any]
        }
        let folder = try layoutFolder()
        let names = try FileManager.default.contentsOfDirectory(atPath: folder).filter { !$0.hasPrefix(".") }.sorted()
        let paths = names.map { folder + "/" + $0 }
        let cold = try layout(paths, on: socket, id: 3)
        var stored: [Double] = []
        for round in 0..<3 { stored.append(try layout(paths, on: socket, id: 4 + UInt32(round)).toLast) }
        let best = stored.min() ?? .nan, middle = median(stored)
        print("  \(paths.count) small files, cold: \(fmt(cold.toLast / 1e9, 1)) s to the last, \(cold.placeholders) placeholders; info stored: to the last item \(stored.map { fmt($0 / 1e6, 1) }.joined(separator: ", ")) ms")
        report.add(Row(scenario: "layout", figure: "\(paths.count) files, info stored: to the last item (median of 3)", value: "\(fmt(middle / 1e6, 1)) ms",
                       baseline: "cold \(fmt(cold.toLast / 1e9, 1)) s", ratio: "", goal: "<= 100 ms", pass: middle <= 100e6))
        results["folder"] = ["files": paths.count, "cold_to_last_ms": json(cold.toLast / 1e6), "cold_placeholders": cold.placeholders,
                             "stored_to_last_ms": stored.map { json($0 / 1e6) }, "stored_best_ms": json(best / 1e6)] as [String: Any]
        report.results["layout"] = results
    }

    /// `settings.layoutFiles` small JPEGs (320×240, each its own inode, with a 160×120 EXIF
    /// thumbnail, as a phone's photos have) in one folder; idempotent.
    func layoutFolder() throws -> String {
        let count = settings.layoutFiles
        let directory = (settings.smoke ? workDirectory : corpus.root) + "/layout-\(count)"
        let marker = directory + "/.complete"
        if FileManager.default.fileExists(atPath: marker) { return directory }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let photoPath = directory + "/.photo.jpg", thumbnailPath = directory + "/.thumbnail.jpg"
        defer { for scratch in [photoPath, thumbnailPath] { try? FileManager.default.removeItem(atPath: scratch) } }
        try ImageFixtures.write(path: photoPath, pixels: ImageFixtures.gradient(width: 320, height: 240), width: 320, height: 240, bands: 3)
        try ImageFixtures.write(path: thumbnailPath, pixels: ImageFixtures.gradient(width: 160, height: 120), width: 160, height: 120, bands: 3)
        let photo = try [UInt8](Data(contentsOf: URL(fileURLWithPath: photoPath)))
        let thumbnail = try [UInt8](Data(contentsOf: URL(fileURLWithPath: thumbnailPath)))
        for i in 0..<count {
            // Four bytes after the JPEG's end make each file's bytes its own.
            var bytes = ImageFixtures.withExifThumbnail(photo, thumbnail: thumbnail, orientation: 1 + i % 8)
            bytes.append(contentsOf: withUnsafeBytes(of: UInt32(i).littleEndian, Array.init))
            try Data(bytes).write(to: URL(fileURLWithPath: String(format: "%@/small-%05d.jpg", directory, i)))
        }
        _ = FileManager.default.createFile(atPath: marker, contents: nil)
        return directory
    }
}
