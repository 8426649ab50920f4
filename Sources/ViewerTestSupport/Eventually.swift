#if canImport(Glibc)
import Glibc
#endif

/// Polls `condition` every 20 ms until it holds or `timeout` passes; returns whether it held.
///
/// ```swift
/// #expect(eventually(.seconds(5)) { daemon.workerPIDs().count == 2 })
/// ```
public func eventually(_ timeout: Duration = .seconds(10), _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}
