#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value that only one thread at a time may touch: a pthread mutex around it.
///
/// Used instead of `Synchronization.Mutex` because ThreadSanitizer must see our locks for
/// `make sanitize` to mean anything: on Linux, `Mutex` locks with atomics and futex calls
/// inside the uninstrumented `libswiftSynchronization.so`, so every access made under it is
/// reported as a race, while `pthread_mutex_lock` is intercepted and understood
/// (docs/DECISIONS.md, "Locks"). Uncontended, the two cost the same (a compare-and-swap).
///
/// ```swift
/// let counts = Locked([String: Int]())
/// counts.withLock { $0["hits", default: 0] += 1 }
/// ```
///
/// Give it a value with a size: with `Locked<Void>`, ThreadSanitizer reports the access to the
/// zero-sized value at the lock object's own address, which another thread reads before it
/// takes the mutex, as a race (seen in `make sanitize` after issue 29; a count will do).
///
/// `@unchecked Sendable`: `value` is read and written only inside `withLock`, with `mutex`
/// held; values move in and out as `sending`, so nothing non-Sendable escapes the lock.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    /// Creates the lock around `initialValue`.
    public init(_ initialValue: sending Value) {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
        value = initialValue
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held and the value lent to it; returns what `body` returns.
    /// Not reentrant: calling `withLock` on the same lock from `body` deadlocks.
    public func withLock<Result, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        // Failure here is a programmer error (a destroyed or corrupted mutex): trap.
        let locked = pthread_mutex_lock(mutex)
        precondition(locked == 0, "pthread_mutex_lock failed: \(locked)")
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
