import Dispatch

/// Blocking file-system work of the thumbnail service (a stat, a realpath, reading or writing a
/// thumbnail) run off Swift's task pool, whose few threads a hung network mount would stall for
/// every file. A concurrent queue of its own: its threads are Dispatch's to add when some block.
enum FileWork {
    static let queue = DispatchQueue(label: "viewerd-thumbnailer.files", attributes: .concurrent)

    static func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { done in queue.async { done.resume(returning: work()) } }
    }

    static func run<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { done in queue.async { done.resume(with: Result { try work() }) } }
    }
}
