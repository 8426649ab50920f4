import Testing
@testable import IIIF

/// The URL grammar of both versions: every form, the differences between 2.1 and 3.0, and
/// every error with its status.
@Suite("IIIFImageRequest")
struct IIIFImageRequestTests {
    func parse(_ version: IIIFVersion = .v3, region: String = "full", size: String = "max", rotation: String = "0",
               format qualityAndFormat: String = "default.jpg") throws(IIIFProblem) -> IIIFImageRequest {
        try IIIFImageRequest(version: version, region: region, size: size, rotation: rotation, qualityAndFormat: qualityAndFormat)
    }

    func status(_ body: () throws(IIIFProblem) -> IIIFImageRequest) -> Int {
        do throws(IIIFProblem) { _ = try body(); return 200 } catch { return error.status }
    }

    @Test("parses every region form")
    func regions() throws {
        #expect(try parse(region: "full").region == .full)
        #expect(try parse(region: "square").region == .square)
        #expect(try parse(region: "10,20,300,400").region == .pixels(x: 10, y: 20, width: 300, height: 400))
        #expect(try parse(region: "pct:10,20.5,30,.5").region == .percent(x: 10, y: 20.5, width: 30, height: 0.5))
        #expect(try parse(.v2, region: "square").region == .square)
    }

    @Test("refuses bad regions with 400", arguments: [
        "", "ful", "1,2,3", "1,2,3,4,5", "-1,0,10,10", "0,0,0,10", "0,0,10,0", "a,b,c,d", "pct:0,0,0,10", "pct:1,2,3",
        "pct:100,0,10,10", "pct:-1,0,10,10", "1e3,0,10,10", "0,0,99999999999,10", "pct:1..2,0,1,1", "+1,0,1,1", "0x1,0,1,1",
    ])
    func badRegions(_ region: String) {
        #expect(status { () throws(IIIFProblem) in try parse(region: region) } == 400)
    }

    @Test("parses every 3.0 size form, ^ included")
    func sizes3() throws {
        #expect(try parse(size: "max").size == IIIFSize(form: .max, upscale: false))
        #expect(try parse(size: "^max").size == IIIFSize(form: .max, upscale: true))
        #expect(try parse(size: "150,").size.form == .width(150))
        #expect(try parse(size: ",150").size.form == .height(150))
        #expect(try parse(size: "pct:50").size.form == .percent(50))
        #expect(try parse(size: "225,100").size.form == .exact(width: 225, height: 100))
        #expect(try parse(size: "!225,100").size.form == .confined(width: 225, height: 100))
        #expect(try parse(size: "^!225,100").size == IIIFSize(form: .confined(width: 225, height: 100), upscale: true))
        #expect(try parse(size: "^pct:120").size == IIIFSize(form: .percent(120), upscale: true))
        #expect(try parse(size: "^,150").size == IIIFSize(form: .height(150), upscale: true))
    }

    @Test("2.1 has full and no ^; 3.0 has ^ and no full")
    func sizeVersions() throws {
        #expect(try parse(.v2, size: "full").size.form == .max)
        #expect(try parse(.v2, size: "max").size.form == .max)
        #expect(status { () throws(IIIFProblem) in try parse(.v3, size: "full") } == 400)
        #expect(status { () throws(IIIFProblem) in try parse(.v2, size: "^max") } == 400)
        #expect(status { () throws(IIIFProblem) in try parse(.v2, size: "^100,") } == 400)
    }

    @Test("refuses bad sizes with 400", arguments: [
        "", "maxx", "0,", ",0", "0,0", "pct:0", "pct:", "pct:-5", ",", "!100,", "!,100", "1,2,3", "abc", "^", "^^max", "!!1,1",
        "^full", "-1,", "10.5,", "99999999999,",
    ])
    func badSizes(_ size: String) {
        #expect(status { () throws(IIIFProblem) in try parse(size: size) } == 400)
    }

    @Test("parses rotations and mirroring; other angles are 501, non-numbers 400")
    func rotations() throws {
        #expect(try parse(rotation: "0").rotation == IIIFRotation(degrees: 0, mirror: false))
        #expect(try parse(rotation: "90").rotation == IIIFRotation(degrees: 90, mirror: false))
        #expect(try parse(rotation: "!180").rotation == IIIFRotation(degrees: 180, mirror: true))
        #expect(try parse(rotation: "270.0").rotation == IIIFRotation(degrees: 270, mirror: false))
        #expect(try parse(rotation: "360").rotation == IIIFRotation(degrees: 0, mirror: false))
        #expect(status { () throws(IIIFProblem) in try parse(rotation: "22.5") } == 501)
        for bad in ["", "!", "-90", "abc", "361", "90!", "!!90", "1e2"] {
            #expect(status { () throws(IIIFProblem) in try parse(rotation: bad) } == 400, "\(bad)")
        }
    }

    @Test("parses qualities and formats; IIIF's other formats are 415, anything else 400")
    func qualitiesAndFormats() throws {
        for quality in IIIFQuality.allCases {
            for format in IIIFFormat.allCases {
                let request = try parse(format: "\(quality.rawValue).\(format.rawValue)")
                #expect(request.quality == quality && request.format == format)
            }
        }
        #expect(status { () throws(IIIFProblem) in try parse(format: "default.tif") } == 415)
        #expect(status { () throws(IIIFProblem) in try parse(format: "default.pdf") } == 415)
        for bad in ["default", "default.", "grey.jpg", "native.jpg", "default.jpeg", "default.xyz", ".jpg", "Default.jpg"] {
            #expect(status { () throws(IIIFProblem) in try parse(format: bad) } == 400, "\(bad)")
        }
    }

    @Test("an error's reason names the parameter")
    func reasons() {
        do throws(IIIFProblem) {
            _ = try parse(size: "banana")
            Issue.record("parsed")
        } catch {
            #expect(error.reason.hasPrefix("size: banana"))
        }
    }
}
