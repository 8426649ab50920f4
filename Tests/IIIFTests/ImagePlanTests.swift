import Testing
import ViewerProtocol
@testable import IIIF

/// The size arithmetic (the spec's examples), edge cropping, the limits, and which requests
/// are exactly a tile of the daemon's pyramid.
@Suite("ImagePlan")
struct ImagePlanTests {
    let limits = IIIFConfiguration(roots: [:], maxWidth: 4000, maxHeight: 3000, maxArea: 9_000_000)

    func resolve(_ version: IIIFVersion = .v3, region: String = "full", size: String, width: Int, height: Int,
                 limits: IIIFConfiguration? = nil) throws(IIIFProblem) -> ResolvedImage {
        let request = try IIIFImageRequest(version: version, region: region, size: size, rotation: "0", qualityAndFormat: "default.jpg")
        return try request.resolve(width: width, height: height, limits: limits ?? self.limits)
    }

    func size(_ size: String, of width: Int, _ height: Int, version: IIIFVersion = .v3) throws -> [Int] {
        let r = try resolve(version, size: size, width: width, height: height)
        return [r.width, r.height]
    }

    func status(_ body: () throws(IIIFProblem) -> ResolvedImage) -> Int {
        do throws(IIIFProblem) { _ = try body(); return 200 } catch { return error.status }
    }

    @Test("sizes of a 300x200 region as the spec's examples show them")
    func specExamples() throws {
        #expect(try size("max", of: 300, 200) == [300, 200])
        #expect(try size("150,", of: 300, 200) == [150, 100])
        #expect(try size(",150", of: 300, 200) == [225, 150])
        #expect(try size("pct:50", of: 300, 200) == [150, 100])
        #expect(try size("225,100", of: 300, 200) == [225, 100])
        #expect(try size("!225,100", of: 300, 200) == [150, 100])
        #expect(try size("!100,225", of: 300, 200) == [100, 67])
        #expect(try size("^360,360", of: 300, 200) == [360, 360])
        #expect(try size("^pct:200", of: 300, 200) == [600, 400])
        #expect(try size("^!600,600", of: 300, 200) == [600, 400])
    }

    @Test("a derived side is rounded to the nearest pixel, halves up, and is at least 1")
    func rounding() throws {
        #expect(try size("100,", of: 1000, 667) == [100, 67])   // 66.7
        #expect(try size("500,", of: 1000, 667) == [500, 334])  // 333.5
        #expect(try size("1,", of: 1000, 10) == [1, 1])         // 0.01
        #expect(try size("pct:33.3", of: 1000, 1000) == [333, 333])
        #expect(status { () throws(IIIFProblem) in try resolve(size: "pct:0.01", width: 100, height: 100) } == 400)
    }

    @Test("w,h keeps or changes the aspect ratio: stretch says which")
    func stretch() throws {
        #expect(try resolve(size: "150,100", width: 300, height: 200).stretch == false)
        #expect(try resolve(size: "150,150", width: 300, height: 200).stretch == true)
        #expect(try resolve(size: "100,67", width: 1000, height: 667).stretch == false)
    }

    @Test("3.0 upscales only with ^; 2.1 always may")
    func upscaling() throws {
        for bad in ["1500,1500", ",1500", "1500,", "pct:200", "!2000,3000", "1001,1000"] {
            #expect(status { () throws(IIIFProblem) in try resolve(size: bad, width: 1000, height: 1000) } == 400, "\(bad)")
        }
        #expect(try size("^,1500", of: 1000, 1000) == [1500, 1500])
        #expect(try size(",1500", of: 1000, 1000, version: .v2) == [1500, 1500])
        #expect(try size("pct:200", of: 1000, 1000, version: .v2) == [2000, 2000])
        #expect(try size("^!2000,500", of: 1000, 1000) == [500, 500])
    }

    @Test("max stays inside maxWidth, maxHeight and maxArea; ^max is max (the validator's size_up: the region's size, not the limits')")
    func maxAndLimits() throws {
        #expect(try size("max", of: 8000, 3000) == [4000, 1500])
        #expect(try size("max", of: 3000, 6000) == [1500, 3000])
        let area = try resolve(size: "max", width: 3900, height: 2900)
        #expect(area.width * area.height <= 9_000_000 && area.width <= 3900 && abs(Double(area.width) / Double(area.height) - 3900.0 / 2900) < 0.01)
        #expect(try size("^max", of: 400, 300) == [400, 300])
        #expect(try size("^max", of: 8000, 3000) == [4000, 1500])
        #expect(try size("full", of: 8000, 3000, version: .v2) == [4000, 1500])
    }

    @Test("a size past a limit is 400 naming the limit")
    func limitNamed() {
        func reason(_ size: String, _ width: Int, _ height: Int) -> String {
            do throws(IIIFProblem) { _ = try resolve(.v2, size: size, width: width, height: height); return "" } catch { return error.reason }
        }
        #expect(reason("4001,", 5000, 100).contains("maxWidth 4000"))
        #expect(reason(",3001", 100, 5000).contains("maxHeight 3000"))
        #expect(reason("3500,2900", 5000, 5000).contains("maxArea 9000000"))
        #expect(reason("4294967295,4294967295", 5000, 5000).contains("maxWidth"))
    }

    @Test("hostile numbers are 400 naming the limit, never a trap", arguments: [
        ("full", "pct:99999999999999999999", 400), ("full", "^pct:99999999999999999999", 400), ("0,0,1,4000", "4294967295,", 400),
        ("full", "^4294967295,", 400), ("full", "^!4294967295,4294967295", 400), ("full", "^4294967295,4294967295", 400),
        ("pct:0,0,99999999999999999999,1", "max", 200),
    ])
    func hostileNumbers(_ region: String, _ size: String, _ expected: Int) {
        // The percentages trapped converting a huge Double to Int ("Double value cannot be
        // converted to Int because the result would be greater than Int.max").
        for version in IIIFVersion.allCases where version == .v3 || !size.hasPrefix("^") {
            #expect(status { () throws(IIIFProblem) in try resolve(version, region: region, size: size, width: 6000, height: 4000) } == expected)
        }
    }

    @Test("a region past the edge is cropped at it; one wholly outside is 400")
    func edgeCropping() throws {
        let cropped = try resolve(region: "5000,3000,2000,2000", size: "max", width: 6000, height: 4000)
        #expect([cropped.x, cropped.y, cropped.regionWidth, cropped.regionHeight] == [5000, 3000, 1000, 1000])
        #expect([cropped.width, cropped.height] == [1000, 1000])
        #expect(status { () throws(IIIFProblem) in try resolve(region: "6000,0,10,10", size: "max", width: 6000, height: 4000) } == 400)
        #expect(status { () throws(IIIFProblem) in try resolve(region: "0,4000,10,10", size: "max", width: 6000, height: 4000) } == 400)
        let percent = try resolve(region: "pct:90,90,20,20", size: "max", width: 1000, height: 500)
        #expect([percent.x, percent.y, percent.regionWidth, percent.regionHeight] == [900, 450, 100, 50])
        let square = try resolve(region: "square", size: "max", width: 6000, height: 4000)
        #expect([square.x, square.y, square.regionWidth, square.regionHeight] == [1000, 0, 4000, 4000])
        let validator = try resolve(region: "pct:11,21,9,9", size: "max", width: 1000, height: 1000)
        #expect([validator.x, validator.y, validator.regionWidth, validator.regionHeight] == [110, 210, 90, 90])
    }

    // MARK: Tiles

    func plan(_ region: String, _ size: String, width: Int = 6000, height: Int = 4000, sides: [Int] = [256]) throws -> ImagePlan {
        var configuration = IIIFConfiguration(roots: [:])
        configuration.tileSizes = sides
        let exchange = IIIFExchange(configuration: configuration, version: .v3, base: "http://h/iiif/3/p%2Fa",
                                    source: ResolvedSource(path: "/p/a", identity: FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4)),
                                    kind: .info(linkedData: false))
        let request = try IIIFImageRequest(version: .v3, region: region, size: size, rotation: "0", qualityAndFormat: "default.jpg")
        return try exchange.plan(request, IIIFSourceInfo(width: width, height: height)).0
    }

    @Test("every tile a IIIF viewer asks of info.json's tiles is the daemon's tile, pixel for pixel")
    func tilesMatchThePyramid() throws {
        // As OpenSeadragon and the spec's §5.4 tile algorithm build them: region x,y,w,h at
        // scale factor sf, size ⌈w/sf⌉,⌈h/sf⌉.
        let (width, height, side) = (6000, 4000, 256)
        let pyramid = TilePyramid(width: width, height: height, tileSize: side, overlap: 0)
        let info = IIIFInfo(version: .v3, id: "x", width: width, height: height, configuration: IIIFConfiguration(roots: [:]))
        for sf in info.scaleFactors(tileSize: side) {
            let span = side * sf
            for y in stride(from: 0, to: height, by: span) {
                for x in stride(from: 0, to: width, by: span) {
                    let w = min(span, width - x), h = min(span, height - y)
                    let tw = (w + sf - 1) / sf, th = (h + sf - 1) / sf
                    let plan = try plan("\(x),\(y),\(w),\(h)", "\(tw),\(th)")
                    let level = pyramid.top - sf.trailingZeroBitCount
                    let expected = pyramid.tile(level: level, column: x / span, row: y / span)!
                    #expect(plan.tile == TileAddress(expected, of: pyramid), "\(x),\(y),\(w),\(h) \(tw),\(th)")
                    #expect(plan.region == nil && [plan.width, plan.height] == [expected.width, expected.height])
                }
            }
        }
    }

    @Test("the tile with `w,` as 2.1 viewers ask it, the whole image at a low level, and near misses")
    func tileForms() throws {
        #expect(try plan("0,0,512,512", "256,").tile == TileAddress(level: 12, column: 0, row: 0, size: 256, overlap: 0))
        #expect(try plan("full", "188,125").tile == TileAddress(level: 8, column: 0, row: 0, size: 256, overlap: 0))
        #expect(try plan("0,0,1024,1024", "512,", sides: [512]).tile == TileAddress(level: 12, column: 0, row: 0, size: 512, overlap: 0))
        // Off the grid, another size, or stretched: a region render instead.
        #expect(try plan("1,0,512,512", "256,").tile == nil)
        #expect(try plan("0,0,512,512", "255,").tile == nil)
        #expect(try plan("0,0,512,512", "256,").region == nil)
        let miss = try plan("0,0,512,512", "200,")
        #expect(miss.tile == nil && miss.region == PixelRegion(x: 0, y: 0, width: 512, height: 512))
        #expect(try plan("full", "max").tile == nil && plan("full", "max").region == nil)
    }

    @Test("a video is planned whole, with its time; a part of it is 501")
    func videos() throws {
        var configuration = IIIFConfiguration(roots: [:])
        configuration.tileSizes = [256]
        let exchange = IIIFExchange(configuration: configuration, version: .v3, base: "http://h/iiif/3/v",
                                    source: ResolvedSource(path: "/v", identity: FileIdentity(device: 1, inode: 2, size: 3, mtimeNanoseconds: 4)),
                                    kind: .info(linkedData: false))
        let request = try IIIFImageRequest(version: .v3, region: "full", size: "256,", rotation: "90", qualityAndFormat: "gray.webp", timeMillis: 1500)
        let (plan, canonical) = try exchange.plan(request, IIIFSourceInfo(width: 1920, height: 1080, kind: .video))
        #expect(plan.timeMillis == 1500 && plan.tile == nil && plan.rotation == 90 && plan.quality == .gray && plan.format == .webp)
        #expect(plan.outputSize.width == 144 && plan.outputSize.height == 256)
        #expect(canonical == "http://h/iiif/3/v/full/256,144/90/gray.webp?time=1500")
        let part = try IIIFImageRequest(version: .v3, region: "0,0,10,10", size: "max", rotation: "0", qualityAndFormat: "default.jpg")
        #expect(throws: IIIFProblem.self) { try exchange.plan(part, IIIFSourceInfo(width: 1920, height: 1080, kind: .video)) }
        // An image ignores the time.
        #expect(try exchange.plan(request, IIIFSourceInfo(width: 1920, height: 1080)).0.timeMillis == nil)
    }
}
