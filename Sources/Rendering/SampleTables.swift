#if canImport(Glibc)
import Glibc
#endif
import MediaFormats

/// What an ISO media file's (MP4, MOV) sample tables claim, read before FFmpeg opens it.
///
/// FFmpeg's mov demuxer builds, while it opens the file, one 24-byte index entry for every
/// sample the tables claim, and its tables need no bytes per sample to claim them (a constant
/// `stsz` size, one `stsc` run, one `stts` entry): 12.7 KB claiming 85 million samples made a
/// worker fill 2 GB (review #3 of issue 29). A sample is at least one byte of the file, so a
/// file whose tracks claim more samples than it has bytes is damaged, and is refused before a
/// decoder sees it, by the daemon's sniffer (no job at all) and by the worker (INFO, and any
/// path the sniffer did not see). What FFmpeg allocates for files that pass is capped in
/// the worker too (video.c, `VV_MAX_ALLOC`).
///
/// ```swift
/// if let problem = SampleTables.problem(fileSize: size, read: read) { throw .damagedVideo(path: path, detail: problem) }
/// ```
public struct SampleTables: Sendable, Equatable {
    /// The index entries the tracks' tables claim, all tracks together: for a track indexed
    /// by sample (video, and most audio) the largest count of its `stsz`, `stts` and `stsc`;
    /// for uncompressed audio read by chunk (one `stts` entry of duration 1, as FFmpeg reads
    /// it) the chunks and the 1024-sample pieces FFmpeg cuts them into.
    public var claimedEntries: UInt64 = 0
    /// The tracks read.
    public var tracks = 0

    /// How many boxes are read at one level, and how many top-level boxes are passed over
    /// looking for `moov`: a real file has a handful; a hostile one costs at most these reads.
    static let boxesPerLevel = 1024, topLevelBoxes = 64
    /// How much of one `stts` or `stsc` table is read (2 million and 1.4 million entries); the
    /// entries past it are not counted (FFmpeg's own allocation cap bounds what they cost).
    static let tableBytes = 16 << 20
    /// How much of the file's tables is read in all, whatever the tracks: a sparse file can
    /// claim tables of any size without the disk holding them, and the sniffer reads on the
    /// daemon's shared I/O threads.
    static let readBudget = 32 << 20
    /// The tracks read; a file with more is refused (a camera's has two or three).
    static let maximumTracks = 64
    /// The index entries FFmpeg may build for one file, whatever its size (a sparse file has
    /// bytes for any claim): 4 million entries of 24 bytes, with their 8-byte composition
    /// offsets, are 128 MiB, within twice a video's admission estimate; 19 hours of 60 fps.
    public static let maximumEntries: UInt64 = 1 << 22

    /// Why the sample tables of the file cannot be true, or nil: they fit in its `fileSize`
    /// bytes, or the file has no `moov` this can read (FFmpeg then says what is wrong).
    /// - Parameter read: `count` bytes at `offset` of the file (fewer at its end).
    public static func problem(fileSize: UInt64, read: (_ offset: UInt64, _ count: Int) -> [UInt8]) -> String? {
        guard let tables = of(fileSize: fileSize, read: read) else { return nil }
        if tables.tracks > maximumTracks {
            return "the movie has \(tables.tracks) tracks, more than viewerd reads (\(maximumTracks))"
        }
        let claim = "the sample tables claim \(tables.claimedEntries) samples in \(tables.tracks) track" +
            (tables.tracks == 1 ? "" : "s")
        if tables.claimedEntries > fileSize { return claim + ", more than the file's \(fileSize) bytes can hold" }
        if tables.claimedEntries > maximumEntries { return claim + ", more than viewerd lets FFmpeg index (\(maximumEntries))" }
        return nil
    }

    /// `problem` of the file open on `descriptor` (read with pread: its offset is kept).
    public static func problem(descriptor: Int32, fileSize: UInt64) -> String? {
        problem(fileSize: fileSize) { offset, count in
            guard offset < UInt64(Int64.max), count > 0 else { return [] }
            var bytes = [UInt8](repeating: 0, count: count)
            let n = bytes.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, off_t(offset)) }
            return n > 0 ? Array(bytes[0..<n]) : []
        }
    }

    /// The claims of the file's `moov`, or nil when it has none within its first boxes.
    public static func of(fileSize: UInt64, read: (_ offset: UInt64, _ count: Int) -> [UInt8]) -> SampleTables? {
        withoutActuallyEscaping(read) { read in tables(of: BoxReader(size: fileSize, read: read)) }
    }

    private static func tables(of file: BoxReader) -> SampleTables? {
        let fileSize = file.size
        guard let movie = file.children(of: 0..<fileSize, limit: topLevelBoxes).first(where: { $0.type == "moov" }) else {
            return nil
        }
        var tables = SampleTables()
        for track in file.children(of: movie.payload) where track.type == "trak" {
            // Past the limit the tracks are only counted: the file is refused for them.
            guard tables.tracks < maximumTracks else {
                tables.tracks += 1
                continue
            }
            guard let media = file.child("mdia", of: track.payload) else { continue }
            let handler = file.child("hdlr", of: media.payload).flatMap { file.fourCC(at: $0.payload.lowerBound + 8) }
            guard let info = file.child("minf", of: media.payload), let table = file.child("stbl", of: info.payload) else { continue }
            tables.tracks += 1
            tables.claimedEntries = sum(tables.claimedEntries, trackEntries(file, table, audio: handler == "soun"))
        }
        return tables
    }

    /// The index entries FFmpeg builds for one track's sample table box (`stbl`).
    private static func trackEntries(_ file: BoxReader, _ table: Box, audio: Bool) -> UInt64 {
        let boxes = file.children(of: table.payload)
        func box(_ types: String...) -> Box? { boxes.first { types.contains($0.type) } }
        // stsz: version and flags, the constant size, the count; stz2: version and flags,
        // 3 reserved bytes and the field size, the count.
        let sizes = box("stsz", "stz2").flatMap { file.uint32(at: $0.payload.lowerBound + 8) } ?? 0
        // stts: (count, duration) pairs.
        var times: UInt64 = 0, chunkedAudio = false
        if let stts = box("stts"), let entries = file.entries(of: stts, size: 8) {
            for i in 0..<entries.count / 8 { times = sum(times, UInt64(be32(entries, 8 * i))) }
            chunkedAudio = audio && entries.count == 8 && be32(entries, 4) == 1
        }
        // stco/co64: chunk offsets (how many chunks the stsc runs reach); stsc: (first chunk,
        // samples per chunk, description) runs, each to the next one's first chunk.
        let chunks = box("stco").flatMap { file.entries(of: $0, size: 4).map { UInt64($0.count / 4) } }
            ?? box("co64").flatMap { file.entries(of: $0, size: 8).map { UInt64($0.count / 8) } } ?? 0
        var runs: UInt64 = 0, pieces: UInt64 = 0
        if let stsc = box("stsc"), let entries = file.entries(of: stsc, size: 12) {
            let count = entries.count / 12
            for i in 0..<count {
                let first = UInt64(be32(entries, 12 * i)), perChunk = UInt64(be32(entries, 12 * i + 4))
                let next = i + 1 < count ? UInt64(be32(entries, 12 * (i + 1))) : chunks + 1
                let span = next > first ? next - first : 0
                runs = sum(runs, product(span, perChunk))
                pieces = sum(pieces, product(span, (perChunk + 1023) / 1024))
            }
        }
        if chunkedAudio { return sum(chunks, pieces) }
        return max(UInt64(sizes), times, runs)
    }

    private static func sum(_ a: UInt64, _ b: UInt64) -> UInt64 { a.addingReportingOverflow(b).overflow ? .max : a + b }
    private static func product(_ a: UInt64, _ b: UInt64) -> UInt64 {
        a.multipliedReportingOverflow(by: b).overflow ? .max : a * b
    }
    private static func be32(_ b: [UInt8], _ i: Int) -> UInt32 {
        UInt32(b[i]) << 24 | UInt32(b[i + 1]) << 16 | UInt32(b[i + 2]) << 8 | UInt32(b[i + 3])
    }
}

/// A box's type and its payload's place in the file.
private struct Box {
    var type: String
    var payload: Range<UInt64>
}

/// ISO BMFF boxes read where they lie, header by header: every read is of a few bytes, or of
/// a table at most `SampleTables.tableBytes` long and `SampleTables.readBudget` in all,
/// whatever the sizes claim.
private final class BoxReader {
    let size: UInt64
    let read: (_ offset: UInt64, _ count: Int) -> [UInt8]
    /// What is left of `SampleTables.readBudget` for tables.
    private var budget = SampleTables.readBudget

    init(size: UInt64, read: @escaping (_ offset: UInt64, _ count: Int) -> [UInt8]) {
        self.size = size
        self.read = read
    }

    /// The boxes laid end to end in `range`, at most `limit`. Each advances by at least its
    /// header, so the walk ends within the range whatever the sizes say.
    func children(of range: Range<UInt64>, limit: Int = SampleTables.boxesPerLevel) -> [Box] {
        var result: [Box] = []
        var at = range.lowerBound
        while result.count < limit, range.upperBound - at >= 8 {
            let head = read(at, 16)
            guard head.count >= 8 else { break }
            var length = UInt64(UInt32(head[0]) << 24 | UInt32(head[1]) << 16 | UInt32(head[2]) << 8 | UInt32(head[3]))
            var header: UInt64 = 8
            if length == 1 {
                guard head.count >= 16 else { break }
                length = head[8..<16].reduce(0) { $0 << 8 | UInt64($1) }
                header = 16
            } else if length == 0 {
                length = range.upperBound - at  // to the end of its parent
            }
            guard length >= header, length <= range.upperBound - at else { break }
            result.append(Box(type: String(decoding: head[4..<8], as: UTF8.self), payload: at + header..<at + length))
            at += length
        }
        return result
    }

    func child(_ type: String, of range: Range<UInt64>) -> Box? { children(of: range).first { $0.type == type } }

    func fourCC(at offset: UInt64) -> String? {
        let bytes = read(offset, 4)
        return bytes.count == 4 ? String(decoding: bytes, as: UTF8.self) : nil
    }

    func uint32(at offset: UInt64) -> UInt32? {
        let b = read(offset, 4)
        return b.count == 4 ? UInt32(b[0]) << 24 | UInt32(b[1]) << 16 | UInt32(b[2]) << 8 | UInt32(b[3]) : nil
    }

    /// A full box's table (version and flags, a 32-bit count, then entries of `size` bytes):
    /// the entries the count claims that lie within the box and `tableBytes`.
    func entries(of box: Box, size: Int) -> [UInt8]? {
        guard let count = uint32(at: box.payload.lowerBound + 4) else { return nil }
        let length = box.payload.upperBound - box.payload.lowerBound, room = length >= 8 ? length - 8 : 0
        let wanted = min(UInt64(count) * UInt64(size), room / UInt64(size) * UInt64(size),
                         UInt64(SampleTables.tableBytes / size * size), UInt64(budget / size * size))
        guard wanted > 0 else { return [] }
        budget -= Int(wanted)
        let bytes = read(box.payload.lowerBound + 8, Int(wanted))
        return Array(bytes.prefix(bytes.count / size * size))
    }
}
