/// A JSON value written with its keys in the order given, so that the same info.json is the
/// same bytes (its ETag names them).
indirect enum JSONText {
    case string(String)
    case int(Int)
    case array([JSONText])
    case object([(String, JSONText)])

    var bytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out, indent: 0)
        out.append(0x0A)
        return out
    }

    private func write(to out: inout [UInt8], indent: Int) {
        switch self {
        case let .string(text): Self.quote(text, to: &out)
        case let .int(value): out += Array(String(value).utf8)
        case let .array(items):
            // Short arrays of scalars on one line, as people write scaleFactors.
            if items.allSatisfy({ if case .object = $0 { false } else { true } }) {
                out.append(0x5B)
                for (i, item) in items.enumerated() {
                    if i > 0 { out += Array(", ".utf8) }
                    item.write(to: &out, indent: indent)
                }
                out.append(0x5D)
                return
            }
            out += Array("[\n".utf8)
            for (i, item) in items.enumerated() {
                out += [UInt8](repeating: 0x20, count: indent + 2)
                item.write(to: &out, indent: indent + 2)
                out += Array((i == items.count - 1 ? "\n" : ",\n").utf8)
            }
            out += [UInt8](repeating: 0x20, count: indent) + [0x5D]
        case let .object(fields):
            out += Array("{\n".utf8)
            for (i, (name, value)) in fields.enumerated() {
                out += [UInt8](repeating: 0x20, count: indent + 2)
                Self.quote(name, to: &out)
                out += Array(": ".utf8)
                value.write(to: &out, indent: indent + 2)
                out += Array((i == fields.count - 1 ? "\n" : ",\n").utf8)
            }
            out += [UInt8](repeating: 0x20, count: indent) + [0x7D]
        }
    }

    private static func quote(_ text: String, to out: inout [UInt8]) {
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0..<0x20: out += Array("\\u00".utf8) + Array([byte >> 4, byte & 15].map { Array("0123456789abcdef".utf8)[Int($0)] })
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }
}
