import Testing
import ViewerProtocol

@Suite("ByteCount")
struct ByteCountTests {
    @Test("sizes with and without suffixes parse as powers of 1024", arguments: [
        ("1048576", 1_048_576), ("0", 0), ("17B", 17), ("64K", 64 << 10), ("64KiB", 64 << 10), ("64KB", 64 << 10),
        ("512M", 512 << 20), ("512m", 512 << 20), ("2G", 2 << 30), ("1T", 1 << 40), ("  8M ", 8 << 20),
        ("16777215T", 16_777_215 << 40),
    ] as [(String, UInt64)])
    func parses(_ text: String, _ expected: UInt64) {
        #expect(ByteCount.parse(text) == expected)
    }

    @Test("anything else is nil, never a trap", arguments: [
        "", " ", "B", "K", "KiB", "M5", "1.5G", "-1", "12X", "1 G", "5P", "16777216T", "99999999999999999999",
        "1ß", "1ﬀ", "1é",
    ])
    func rejects(_ text: String) {
        #expect(ByteCount.parse(text) == nil)
    }

    @Test("sizes format in the largest unit that keeps a value of at least 1", arguments: [
        (0, "0 B"), (17, "17 B"), (1023, "1023 B"), (1024, "1.0 KiB"), (1536, "1.5 KiB"),
        (312 << 10, "312.0 KiB"), (3 << 29, "1.5 GiB"), (1 << 40, "1.0 TiB"), (1 << 50, "1024.0 TiB"),
    ] as [(UInt64, String)])
    func formats(_ bytes: UInt64, _ expected: String) {
        #expect(ByteCount.format(bytes) == expected)
    }
}
