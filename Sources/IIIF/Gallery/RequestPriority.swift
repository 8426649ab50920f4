import HTTPMessage
import ViewerProtocol

/// The daemon's priority of an HTTP request, from its RFC 9218 `Priority` header's urgency
/// (`u=0` most urgent … `u=7`), which a page sets on `fetch()` for a thumbnail by its distance
/// from the viewport. A request without one (or with one not understood) is `visible`, as
/// before: a person waits on it. The priority orders the daemon's work only: it is in neither
/// the ETag nor `Vary`, for the bytes are the same.
///
/// | urgency | daemon priority |
/// |---------|-----------------|
/// | 0, 1    | visible         |
/// | 2       | high            |
/// | 3       | normal          |
/// | 4, 5    | prefetch        |
/// | 6, 7    | background      |
public enum RequestPriority {
    public static func of(_ headers: HTTPHeaders) -> Priority {
        guard let urgency = urgency(headers) else { return .visible }
        switch urgency {
        case 0, 1: return .visible
        case 2: return .high
        case 3: return .normal
        case 4, 5: return .prefetch
        default: return .background
        }
    }

    /// `u` of the Priority dictionary (RFC 8941 §3.2: `u=N, i`), 0…7; nil when absent or
    /// not an integer in range. Several fields are one list; the last `u` wins, as for a
    /// dictionary.
    static func urgency(_ headers: HTTPHeaders) -> Int? {
        var found: Int?
        for field in headers.values("Priority") {
            for member in field.split(separator: ",") {
                let parts = member.split(separator: ";", maxSplits: 1)[0].split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingSpaces == "u" else { continue }
                let value = parts[1].trimmingSpaces
                guard value.count == 1, let digit = Int(value), (0...7).contains(digit) else { continue }
                found = digit
            }
        }
        return found
    }
}
