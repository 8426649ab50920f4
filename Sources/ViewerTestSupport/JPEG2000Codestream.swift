/// The raw J2K codestream inside a JP2 file's bytes (from its SOC and SIZ markers to the
/// end): what a .j2k file holds. nil when there is none. The tests make .j2k files from the
/// JP2s libvips' jp2ksave writes, which has no option to write a bare codestream.
public func jpeg2000Codestream(of jp2: [UInt8]) -> [UInt8]? {
    let marker: [UInt8] = [0xFF, 0x4F, 0xFF, 0x51]
    var start = 0
    while start + 4 <= jp2.count {
        if jp2[start] == 0xFF, Array(jp2[start..<start + 4]) == marker { return Array(jp2[start...]) }
        start += 1
    }
    return nil
}
