import HTTPMessage

/// The caching rules: a strong ETag naming the exact bytes, Last-Modified from the source,
/// and the conditional requests answered 304 (RFC 9110 §13), from the source's identity: an
/// If-None-Match naming the ETag before the daemon is asked for anything, the other
/// conditions once the request is known to be good for the image.
enum IIIFCaching {
    /// `"` + 32 hex digits + `"`: SHA-256 (truncated to 128 bits) of the source's identity,
    /// the representation's own key (the normalized request, or info.json's id and media
    /// type) and the renderer's version: the same three, the same bytes.
    static func entityTag(identity: FileIdentity, key: String, rendererVersion: String) -> String {
        let text = "viewerd-iiif 1\n\(identity.device) \(identity.inode) \(identity.size) \(identity.mtimeNanoseconds)\n\(key)\n\(rendererVersion)"
        return "\"" + Array(SHA256.hash(Array(text.utf8)).prefix(16)).hex + "\""
    }

    /// Whether the client's copy is current, so the answer is 304: If-None-Match by weak
    /// comparison (`*` matches any), else If-Modified-Since against the whole second.
    /// Conditions are evaluated only for a request whose answer would be a 200 (RFC 9110
    /// §13.2.1): after the request was checked against the image, never before.
    static func notModified(_ headers: HTTPHeaders, entityTag: String, modifiedSeconds: Int64) -> Bool {
        let tags = entityTags(headers)
        if !tags.isEmpty {
            return tags.contains { tag in tag == "*" || matches(tag, entityTag) }
        }
        if let since = headers["If-Modified-Since"], let seconds = HTTPDate.parse(since) {
            return modifiedSeconds <= seconds
        }
        return false
    }

    /// Whether If-None-Match names this very ETag: the one condition that holds before the
    /// request is checked against the image, since an ETag is only ever sent with the 200 of
    /// its own request (`*`, or a date, could make a 304 of what would be a 400).
    static func namesEntityTag(_ headers: HTTPHeaders, _ entityTag: String) -> Bool {
        entityTags(headers).contains { matches($0, entityTag) }
    }

    private static func entityTags(_ headers: HTTPHeaders) -> [Substring] {
        headers.values("If-None-Match").flatMap { $0.split(separator: ",") }.map { $0.trimmingSpaces }
    }

    private static func matches(_ tag: Substring, _ entityTag: String) -> Bool {
        (tag.hasPrefix("W/") ? tag.dropFirst(2) : tag) == Substring(entityTag)
    }
}

extension Substring {
    var trimmingSpaces: Substring {
        var text = self
        while let first = text.first, first == " " || first == "\t" { text = text.dropFirst() }
        while let last = text.last, last == " " || last == "\t" { text = text.dropLast() }
        return text
    }
}

/// HTTP dates (RFC 9110 §5.6.7): written as IMF-fixdate, read in its three forms.
enum HTTPDate {
    static let weekdays = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `Sun, 06 Nov 1994 08:49:37 GMT` of seconds since the epoch.
    static func format(_ seconds: Int64) -> String {
        let day = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let time = seconds - day * 86_400
        let (year, month, dayOfMonth) = civil(fromDays: day)
        let weekday = Int(((day % 7) + 11) % 7)  // 1970-01-01 was a Thursday
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(weekdays[weekday]), \(two(dayOfMonth)) \(months[Int(month) - 1]) \(year) \(two(time / 3600)):\(two(time / 60 % 60)):\(two(time % 60)) GMT"
    }

    /// Seconds since the epoch of an IMF-fixdate, an RFC 850 date or an asctime date; nil otherwise.
    static func parse(_ text: String) -> Int64? {
        let tokens = text.split { !($0.isLetter || $0.isNumber) }.map(String.init)
        let fields: (day: String, month: String, year: String, time: ArraySlice<String>)
        if tokens.count == 8, tokens[7] == "GMT" {
            fields = (tokens[1], tokens[2], tokens[3], tokens[4...6])          // IMF-fixdate, RFC 850
        } else if tokens.count == 7 {
            fields = (tokens[2], tokens[1], tokens[6], tokens[3...5])          // asctime
        } else {
            return nil
        }
        guard let month = months.firstIndex(of: fields.month), let day = Int64(fields.day), var year = Int64(fields.year),
              (1...31).contains(day) else { return nil }
        let time = fields.time.compactMap { Int64($0) }
        guard time.count == 3, time[0] < 24, time[1] < 60, time[2] < 61 else { return nil }
        if fields.year.count == 2 { year += year < 70 ? 2000 : 1900 }
        return days(fromCivil: year, Int64(month + 1), day) * 86_400 + time[0] * 3600 + time[1] * 60 + time[2]
    }

    // Howard Hinnant's days_from_civil and civil_from_days.
    static func days(fromCivil y: Int64, _ m: Int64, _ d: Int64) -> Int64 {
        let y = m <= 2 ? y - 1 : y
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }

    static func civil(fromDays z: Int64) -> (Int64, Int64, Int64) {
        let z = z + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        return (m <= 2 ? yoe + era * 400 + 1 : yoe + era * 400, m, d)
    }
}
