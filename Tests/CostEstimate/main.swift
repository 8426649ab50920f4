// viewerd-cost-estimate: prints what the daemon estimates a render of each file costs, from
// its first bytes alone (HeaderSniffer, then Renderer.estimateCost), for bench/cost-model.sh,
// which sets it beside the measured peak of a worker. Not a product.
//
// usage: viewerd-cost-estimate --box N FILE...
// prints, a line per file: path format width height estimate-bytes costly
import Foundation
import MediaFormats
import Rendering
import ViewerDaemon
import ViewerProtocol

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 3, arguments[0] == "--box", let box = UInt32(arguments[1]) else {
    FileHandle.standardError.write(Data("usage: viewerd-cost-estimate --box N FILE...\n".utf8))
    exit(64)
}
var failed = false
for path in arguments.dropFirst(2) {
    guard let file = FileHandle(forReadingAtPath: path),
          let prefix = try? file.read(upToCount: HeaderSniffer.prefixSize) else {
        FileHandle.standardError.write(Data("viewerd-cost-estimate: cannot read \(path)\n".utf8))
        failed = true
        continue
    }
    let sniffed = HeaderSniffer.sniff(Array(prefix)) { offset, count in
        (try? file.seek(toOffset: offset)).flatMap { try? file.read(upToCount: count) }.map(Array.init) ?? []
    }
    guard var header = sniffed else {
        print(path, "-", 0, 0, 0, false)
        continue
    }
    // As HeaderSniffer.sniff(source) does: an untiled JPEG 2000's codestream is read whole.
    header.jpeg2000?.codestreamBytes = (try? file.seekToEnd()) ?? 0
    let cost = Renderer.estimateCost(header, spec: RenditionSpec(width: box, height: box))
    print(path, header.format?.name ?? "-", header.width, header.height, cost.memoryBytes, cost.costly)
}
exit(failed ? 1 : 0)
