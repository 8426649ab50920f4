import SystemCalls
import ViewerProtocol

/// A raw rendition that came as a sealed memfd (`Capabilities.sharedMemory`), mapped
/// read-only: `RenderResult.shared`. The mapping lives as long as this object (the results
/// and renditions holding it) and is unmapped when the last goes; the descriptor is closed as
/// soon as it is mapped.
///
/// `@unchecked Sendable`: the mapping is read-only and never changes (the memfd is sealed
/// against writing, growing and shrinking), and it is unmapped only in `deinit`.
final class SharedRendition: SharedRenditionBytes, @unchecked Sendable {
    let buffer: UnsafeRawBufferPointer

    /// Maps the first `count` bytes of `descriptor` and closes it, whatever happens. Refuses
    /// a descriptor not sealed as the daemon seals it (its bytes could change or vanish under
    /// the mapping) or shorter than `count`.
    init(taking descriptor: Int32, count: Int) throws(ViewerClientError) {
        defer { Posix.close(descriptor) }
        let (seals, size): (Int32, Int)
        do throws(SystemError) {
            (seals, size) = (try Posix.seals(descriptor), Int(try Posix.status(descriptor).st_size))
        } catch {
            throw .protocolViolation("a shared-memory rendition's descriptor is not a memfd: \(error)")
        }
        guard seals & Posix.readOnlySeals == Posix.readOnlySeals else {
            throw .protocolViolation("a shared-memory rendition's descriptor is not sealed (seals 0x\(String(seals, radix: 16)))")
        }
        guard size >= count else {
            throw .protocolViolation("a shared-memory rendition's descriptor holds \(size) bytes, fewer than its \(count)")
        }
        do throws(SystemError) {
            buffer = try Posix.mapReadOnly(descriptor, count: count)
        } catch {
            throw .protocolViolation("cannot map a shared-memory rendition: \(error)")
        }
    }

    deinit { Posix.unmap(buffer) }
}
