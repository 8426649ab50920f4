import Foundation
import ViewerProtocol
import ViewerTestSupport
#if canImport(Glibc)
import Glibc
#endif

/// How one tile request ended: when (ns after its send), whether from the store, and what came
/// back.
struct TileAnswer {
    var latency: Double
    var fromCache = false
    var width = 0, height = 0
    var error: String?

    init(frame: Frame, latency: Double) {
        self.latency = latency
        switch try? frame.message() {
        case .result(let r)?: (fromCache, width, height) = (r.fromCache, Int(r.width), Int(r.height))
        case .error(let e)?: error = "\(e.code?.name ?? "error \(e.rawCode)"): \(e.message)"
        default: error = "unexpected answer \(frame.type)"
        }
    }

    /// A RESULT of exactly the tile's size: what a daemon that does tiles answers (one that
    /// ignores the tile field answers the whole image).
    func isTile(_ tile: TilePyramid.Tile) -> Bool { error == nil && width == tile.width && height == tile.height }

    var summary: String { error ?? "\(width)x\(height)\(fromCache ? " from the store" : "")" }
}

/// One connection asking the daemon for tiles of a pyramid, a request at a time or a level at a
/// time, with request ids of its own. Confined to the thread that uses it.
final class TileConnection {
    let socket: RawSocket
    private var lastID: UInt32 = 0

    init(_ daemon: DaemonProcess, name: String) throws {
        socket = try daemon.rawConnection(name: name)
    }

    /// The RENDER spec of one tile: JPEG at the default quality; the box is the tile's.
    static func spec(_ tile: TilePyramid.Tile, of pyramid: TilePyramid) -> RenditionSpec {
        RenditionSpec(width: 0, height: 0, format: .jpeg, tile: TileAddress(tile, of: pyramid))
    }

    /// The RENDER frame of one tile at `visible` priority: a viewer asks for what is on screen.
    static func frame(_ path: String, tile: TilePyramid.Tile, of pyramid: TilePyramid, delivery: DeliveryMode = .final,
                      id: UInt32) -> [UInt8] {
        renderFrame(path, spec: spec(tile, of: pyramid), priority: .visible, delivery: delivery, id: id)
    }

    func nextID() -> UInt32 {
        lastID &+= 1
        if lastID == 0 { lastID = 1 }
        return lastID
    }

    /// One tile, asked and waited for (no other request in flight).
    func request(_ path: String, tile: TilePyramid.Tile, of pyramid: TilePyramid) throws -> TileAnswer {
        let started = now()
        try socket.write(Self.frame(path, tile: tile, of: pyramid, id: nextID()))
        let frame = try socket.readFrame()
        return TileAnswer(frame: frame, latency: Double(now() - started))
    }

    /// PING to PONG, in nanoseconds: the floor of any answer on this connection.
    func ping() throws -> Double {
        let started = now()
        try socket.write(Message.ping.frame(requestID: nextID()).bytes)
        _ = try socket.readFrame()
        return Double(now() - started)
    }

    /// Polls every tile of `level` with cache-only delivery (pipelined) every 50 ms until all are
    /// stored or `timeout` seconds pass: how long the level took to be stored after its first
    /// tile was answered. Returns the seconds waited and how many were stored at the end.
    func waitForLevel(_ path: String, pyramid: TilePyramid, level: Int, timeout: Double) throws -> (seconds: Double, stored: Int, total: Int) {
        let tiles = pyramid.tiles(ofLevel: level)
        let started = now()
        while true {
            try socket.write(tiles.flatMap { Self.frame(path, tile: $0, of: pyramid, delivery: .cacheOnly, id: nextID()) })
            var stored = 0
            for _ in tiles where try socket.readFrame().messageType == .result { stored += 1 }
            let waited = seconds(now() - started)
            if stored == tiles.count || waited >= timeout { return (waited, stored, tiles.count) }
            usleep(50_000)
        }
    }

    func close() { socket.shutdown() }
}
