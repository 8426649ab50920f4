#if canImport(Glibc)
import Glibc
#endif

/// The unit the per-address limits count by: an IPv4 address, or an IPv6 address's /64. One
/// host on IPv6 holds a whole /64 (SLAAC, privacy addresses) and may use a new address for
/// every connection, so counting full IPv6 addresses would limit nobody; a /64 is what one
/// subscriber is given, the unit nginx's and the kernel's per-host counts use too.
public enum AddressBlock {
    /// `peer` (numeric, as `HTTPRequest.peer`) as its block: "10.0.0.1" as is (and an
    /// IPv4-mapped IPv6 address as its IPv4), "2001:db8:1:2:…" as "2001:db8:1:2::/64";
    /// anything else unchanged.
    public static func of(_ peer: String) -> String {
        var v6 = in6_addr()
        guard peer.contains(":"), inet_pton(AF_INET6, peer, &v6) == 1 else { return peer }
        let bytes = withUnsafeBytes(of: &v6) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12..<16].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map { String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16) }
        return groups.joined(separator: ":") + "::/64"
    }
}
