#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A condition variable around a check: `wait(until:)` blocks until the closure returns
/// non-nil (re-checked on every signal). Its timed waits run on CLOCK_MONOTONIC: a wall clock
/// stepped back (NTP) does not stretch them, and time suspended does not count.
public final class ConditionBox: @unchecked Sendable {  // the mutex and condition are thread-safe
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    public init() {
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Now on CLOCK_MONOTONIC, in nanoseconds: the clock of `wait`'s deadlines.
    public static func now() -> UInt64 {
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
    }

    public func signal() {
        withLock { _ = pthread_cond_signal(condition) }
    }

    public func broadcast() {
        withLock { _ = pthread_cond_broadcast(condition) }
    }

    /// Runs `body` holding the condition's lock (what `wait(until:)` checks under).
    public func withLock<T>(_ body: () -> T) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// `check` returns nil to keep waiting, `.some(value)` to return `value`. `deadline` (a
    /// `now()` value; nil: none) is read again after every wake, so a changed one counts from
    /// the next signal; a wait that reaches it with nothing to do returns nil and sets `idle`.
    public func wait<T>(until check: () -> T??, deadline: () -> UInt64?, idle: inout Bool) -> T? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while true {
            if let result = check() { return result }
            if let deadline = deadline() {
                guard deadline > Self.now() else {
                    idle = true
                    return nil
                }
                var until = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
                _ = pthread_cond_timedwait(condition, mutex, &until)
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
    }
}
