/// Sizes written by people: "512M", "2G", "1048576", "64KiB".
public enum ByteCount {
    /// Parses a size with an optional K, M, G or T suffix (powers of 1024; "B", "iB" allowed).
    public static func parse(_ text: String) -> UInt64? {
        var digits = Substring(text.trimmingPrefixAndSuffixSpaces())
        var multiplier: UInt64 = 1
        for suffix in ["iB", "B"] where digits.hasSuffix(suffix) && digits.count > suffix.count {
            digits = digits.dropLast(suffix.count)
            break
        }
        // Compare as strings: some characters uppercase to two ("ß" is "SS"), and a Character
        // made from those traps.
        if let last = digits.last, let power = "KMGT".firstIndex(where: { String($0) == last.uppercased() }) {
            multiplier = 1 << (10 * UInt64("KMGT".distance(from: "KMGT".startIndex, to: power) + 1))
            digits = digits.dropLast()
        }
        guard let value = UInt64(digits) else { return nil }
        let (product, overflow) = value.multipliedReportingOverflow(by: multiplier)
        return overflow ? nil : product
    }

    /// "1.5 GiB", "312 KiB", "17 B".
    public static func format(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        return "\(rounded) \(units[unit])"
    }
}

extension String {
    fileprivate func trimmingPrefixAndSuffixSpaces() -> Substring {
        var s = Substring(self)
        while s.first == " " { s.removeFirst() }
        while s.last == " " { s.removeLast() }
        return s
    }
}
