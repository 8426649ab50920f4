import Foundation
import FreedesktopThumbnails

/// The thumbnails Tumbler and viewerd-thumbnailer wrote for the same files, side by side.
extension Bench {
    /// A thumbnail as the cache holds it: its pixel size (IHDR) and text keys.
    struct CachedThumbnail {
        var width: Int
        var height: Int
        var keys: [String: String]
        var bytes: Int

        init?(path: String) {
            guard let data = FileManager.default.contents(atPath: path) else { return nil }
            let png = [UInt8](data)
            // The signature, then IHDR first: length, "IHDR", width, height (big-endian).
            guard png.count >= 33, png.prefix(8).elementsEqual([0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]),
                  png[12..<16].elementsEqual("IHDR".utf8) else { return nil }
            func be32(_ at: Int) -> Int { Int(png[at]) << 24 | Int(png[at + 1]) << 16 | Int(png[at + 2]) << 8 | Int(png[at + 3]) }
            width = be32(16)
            height = be32(20)
            keys = PNGText.read(png)
            bytes = png.count
        }

        var size: String { "\(width)x\(height)" }
    }

    /// For each file: both caches hold `large/<md5 of its URI>.png`, of the same pixel size
    /// within a pixel, whose `Thumb::URI` is the file's URI and whose `Thumb::MTime` is the
    /// file's modification time in whole seconds (Tumbler 4.18 writes it with microseconds,
    /// `1700000000.123456`; the standard says seconds, which viewerd writes: compared by the
    /// whole seconds, and how many were equal as text recorded too).
    func compareCaches(files: [String], tumbler: String, viewerd: String) -> (agree: Int, document: [String: Any]) {
        let tumblerCache = ThumbnailCache(root: tumbler), viewerdCache = ThumbnailCache(root: viewerd)
        var agree = 0, sameText = 0, fractional = 0, sizeAgree = 0, keysAgree = 0
        var mismatches: [String] = [], perFile: [[String: Any]] = []
        var tumblerBytes = 0, viewerdBytes = 0
        for file in files {
            let name = (file as NSString).lastPathComponent
            guard let uri = ThumbnailCache.uri(ofPath: file) else { mismatches.append("\(name): no URI"); continue }
            let mtime = (try? FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as? Date)
                .map { String(Int64($0.timeIntervalSince1970.rounded(.down))) } ?? "?"
            let t = CachedThumbnail(path: tumblerCache.path(of: uri, flavor: .large))
            let v = CachedThumbnail(path: viewerdCache.path(of: uri, flavor: .large))
            tumblerBytes += t?.bytes ?? 0
            viewerdBytes += v?.bytes ?? 0
            func wholeSeconds(_ text: String?) -> String? { text.map { String($0.prefix { $0 != "." }) } }
            func keysRight(_ thumbnail: CachedThumbnail?) -> Bool {
                thumbnail?.keys["Thumb::URI"] == uri && wholeSeconds(thumbnail?.keys["Thumb::MTime"]) == mtime
            }
            let sizes = t.flatMap { t in v.map { v in abs(t.width - v.width) <= 1 && abs(t.height - v.height) <= 1 } } ?? false
            let keys = keysRight(t) && keysRight(v) && t?.keys["Thumb::URI"] == v?.keys["Thumb::URI"]
            if sizes { sizeAgree += 1 }
            if keys { keysAgree += 1 }
            if sizes && keys { agree += 1 }
            if let a = t?.keys["Thumb::MTime"], a == v?.keys["Thumb::MTime"] { sameText += 1 }
            if t?.keys["Thumb::MTime"]?.contains(".") == true { fractional += 1 }
            if !(sizes && keys) {
                func text(_ thumbnail: CachedThumbnail?) -> String {
                    thumbnail.map { "\($0.size) URI \($0.keys["Thumb::URI"] == uri ? "ok" : $0.keys["Thumb::URI"] ?? "none") MTime \($0.keys["Thumb::MTime"] ?? "none")" } ?? "no thumbnail"
                }
                mismatches.append("\(name) (mtime \(mtime)): Tumbler \(text(t)); viewerd \(text(v))")
            }
            perFile.append(["file": name, "md5": ThumbnailCache.md5(uri), "tumbler": t?.size ?? "none", "viewerd": v?.size ?? "none",
                            "tumbler_mtime": t?.keys["Thumb::MTime"] ?? "none", "viewerd_mtime": v?.keys["Thumb::MTime"] ?? "none",
                            "tumbler_bytes": t?.bytes ?? 0, "viewerd_bytes": v?.bytes ?? 0, "agree": sizes && keys])
        }
        for line in mismatches.prefix(8) { print("  differ: \(line)") }
        if mismatches.count > 8 { print("  ... \(mismatches.count - 8) more") }
        print("  thumbnails: \(agree)/\(files.count) agree (size within 1 px \(sizeAgree), Thumb::URI and Thumb::MTime \(keysAgree)); Thumb::MTime equal as text \(sameText), Tumbler's with a fraction \(fractional); PNG bytes Tumbler \(tumblerBytes), viewerd \(viewerdBytes)")
        return (agree, ["agree": agree, "files": files.count, "size_agree": sizeAgree, "keys_agree": keysAgree,
                        "mtime_equal_as_text": sameText, "tumbler_mtime_with_fraction": fractional,
                        "tumbler_png_bytes": tumblerBytes, "viewerd_png_bytes": viewerdBytes,
                        "mismatches": mismatches, "per_file": perFile])
    }

    /// The files in a cache's `fail/` directories (a thumbnailer's record of what it could not do).
    func failureEntries(cache: String) -> Int {
        let fail = cache + "/fail"
        let programs = (try? FileManager.default.contentsOfDirectory(atPath: fail)) ?? []
        return programs.map { ((try? FileManager.default.contentsOfDirectory(atPath: "\(fail)/\($0)")) ?? []).count }.reduce(0, +)
    }
}
