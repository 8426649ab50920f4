import Foundation
import ViewerTestSupport

/// Hostile camera RAWs (issue 31), written by `RawFiles` beside the generator's files: each must
/// get a clear answer, and the good ones must render.
extension HostileFiles {
    func rawCases(in directory: String) throws -> [Case] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var cases: [Case] = []
        func add(_ name: String, _ bytes: [UInt8], _ expected: Set<String>, _ note: String) throws {
            let path = directory + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            cases.append(Case(path: path, expected: expected, note: note))
        }
        let good = RawFiles.dng(RawFiles.Layout(width: 300, height: 200, bitmapPreview: (60, 40)))
        try add("good.dng", good, ["result"], "a DNG whose IFD0 is a tiny bitmap preview")
        try add("bare.dng", RawFiles.dng(RawFiles.Layout(width: 300, height: 200)), ["result"], "a DNG without a preview")
        try add("cut-half.dng", Array(good.prefix(good.count / 2)), ["corrupt-image"],
                "a DNG cut in its sensor data: truncated, whatever the box (its preview is cut too)")
        try add("cut-header.dng", Array(good.prefix(300)), ["corrupt-image", "unsupported-format"], "a DNG cut in its directories")
        try add("lying-size.dng", RawFiles.dng(RawFiles.Layout(width: 300, height: 200, declaredSize: (30000, 20000))),
                ["corrupt-image", "too-large"], "a DNG whose raw directory claims 30000x20000 over 300x200 of data")
        try add("huge-size.dng", RawFiles.dng(RawFiles.Layout(width: 30, height: 20, declaredSize: (65535, 65535))),
                ["corrupt-image", "too-large"], "a DNG claiming 65535x65535")
        let junk = [UInt8](repeating: 0x5A, count: 8192)
        try add("junk.raf", Array("FUJIFILMCCD-RAW 0201FF383501".utf8) + junk, ["corrupt-image", "unsupported-format"],
                "a RAF signature over junk")
        try add("junk.orf", Array("IIRO".utf8) + [8, 0, 0, 0] + junk, ["corrupt-image", "unsupported-format"], "an ORF signature over junk")
        try add("junk.rw2", [0x49, 0x49, 0x55, 0x00, 8, 0, 0, 0] + junk, ["corrupt-image", "unsupported-format"], "an RW2 signature over junk")
        try add("junk.cr3", [0, 0, 0, 24] + Array("ftypcrx ".utf8) + [0, 0, 0, 1] + Array("crx isom".utf8) + junk,
                ["corrupt-image", "unsupported-format"], "a CR3 brand over junk")
        return cases
    }
}
