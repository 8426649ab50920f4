import Locking
import ViewerProtocol

/// The requests of a full-screen pager, driven by the index of the page on screen: that page
/// at `.visible` with `.opportunistic` delivery (a PREVIEW at once, then the sharp RESULT), its
/// neighbours up to `reach` pages either side rendered ahead at lower priority (`.high` next
/// door, `.normal` beyond), and the pages swiped past cancelled (CANCEL), as a grid's reused
/// cell cancels its old request. Pages arrive on `pages`: each one's PREVIEW (degraded, and
/// possibly smaller than the RESULT: take the size from the rendition, scale it to the screen),
/// then its RESULT.
///
/// Safe to use from any thread; `show` only queues frames, so a swipe handler may call it on
/// every page change. State: `state`, behind its lock; the requests' tasks take it only to
/// hand a rendition over.
///
/// ```swift
/// let pager = Pager(client: client, paths: photos, spec: RenditionSpec(width: 2560, height: 1440))
/// Task { for await page in pager.pages { if case .success(let r) = page.result { show(r, at: page.index) } } }
/// pager.show(0)                // the first page, and pages 1 and 2 ahead
/// pager.show(5)                // a fling: pages 0, 1 and 2 are cancelled; 3 to 7 asked
/// ```
public final class Pager: Sendable {
    /// One rendition of a page (its PREVIEW or its RESULT: `Rendition.isDegraded`), or the
    /// daemon's error for it. Cancelled pages send nothing.
    public struct Delivery: Sendable {
        public let index: Int
        public let result: Result<Rendition, ViewerClientError>
    }

    /// The pages' sources, in the pager's order.
    public let paths: [String]
    /// What each page asks for: a screen-sized box.
    public let spec: RenditionSpec
    /// How many pages either side of the current one are rendered ahead.
    public let reach: Int
    /// Every page's renditions as they arrive, while the page is within `reach` of the current
    /// one; ends with `close()`. One consumer: a stream delivers each element once.
    public let pages: AsyncStream<Delivery>

    private struct State {
        var current: Int?
        /// The requests not answered yet, by page.
        var pending: [Int: (handle: RenderRequestHandle, priority: Priority)] = [:]
        /// Pages within reach whose RESULT came: not asked again until they leave and return.
        var finished: Set<Int> = []
        var closed = false
    }

    private let client: ViewerClient
    private let state = Locked(State())
    private let continuation: AsyncStream<Delivery>.Continuation

    /// A pager over `paths`, each page rendered to `spec` (the screen's box), with `reach`
    /// pages rendered ahead either side (2: a swipe always lands on a page already asked).
    public init(client: ViewerClient, paths: [String], spec: RenditionSpec, reach: Int = 2) {
        precondition(reach >= 0, "a pager cannot reach \(reach) pages ahead")
        (self.client, self.paths, self.spec, self.reach) = (client, paths, spec, reach)
        (pages, continuation) = AsyncStream.makeStream(of: Delivery.self)
    }

    deinit { close() }

    /// The priority a page is asked at when `current` is on screen; nil when out of reach.
    public func priority(of page: Int, current: Int) -> Priority? {
        switch abs(page - current) {
        case 0: .visible
        case 1 where reach >= 1: .high
        case let distance where distance <= reach: .normal
        default: nil
        }
    }

    /// Page `index` is on screen: it is asked (or raised) at `.visible`, its neighbours within
    /// `reach` are asked, raised or lowered, and every page still pending out of reach is
    /// cancelled. The pages ahead in the swipe's direction are asked first.
    public func show(_ index: Int) {
        guard paths.indices.contains(index) else { return }
        let started: [(Int, RenderRequestHandle)] = state.withLock { state in
            guard !state.closed else { return [] }
            let forward = index >= (state.current ?? index)
            state.current = index
            // Under the lock, so that a concurrent show never cancels a page before its request
            // is recorded; none of these calls comes back to this lock. The new pages are asked
            // before the old ones are cancelled: the worker a cancel frees takes the newest work.
            var started: [(Int, RenderRequestHandle)] = []
            let order = [index] + (1...max(reach, 1)).flatMap { forward ? [index + $0, index - $0] : [index - $0, index + $0] }
            for page in order where paths.indices.contains(page) {
                guard let priority = priority(of: page, current: index), !state.finished.contains(page) else { continue }
                if let pending = state.pending[page] {
                    if pending.priority != priority {
                        pending.handle.setPriority(priority)
                        state.pending[page] = (pending.handle, priority)
                    }
                    continue
                }
                let handle = client.request(paths[page], spec: spec, priority: priority, delivery: .opportunistic)
                state.pending[page] = (handle, priority)
                started.append((page, handle))
            }
            for (page, pending) in state.pending where priority(of: page, current: index) == nil {
                state.pending[page] = nil
                pending.handle.cancel()
            }
            state.finished = state.finished.filter { priority(of: $0, current: index) != nil }
            return started
        }
        for (page, handle) in started { deliver(page, from: handle) }
    }

    /// Cancels every page still pending and ends `pages`. Also done when the pager is released.
    public func close() {
        let pending = state.withLock { state in
            defer { (state.closed, state.pending, state.finished) = (true, [:], []) }
            return state.pending.values.map(\.handle)
        }
        for handle in pending { handle.cancel() }
        continuation.finish()
    }

    /// Hands `page`'s renditions to `pages` as `handle` gets them, while it is still the page's
    /// request. Captures the state and the stream, not `self`, so that releasing the pager closes it.
    private func deliver(_ page: Int, from handle: RenderRequestHandle) {
        let state = state, continuation = continuation
        Task {
            func current(finishing: Bool) -> Bool {
                state.withLock { state in
                    guard state.pending[page]?.handle === handle else { return false }
                    if finishing {
                        state.pending[page] = nil
                        state.finished.insert(page)
                    }
                    return true
                }
            }
            do {
                for try await rendition in handle.renditions() {
                    guard current(finishing: !rendition.isDegraded) else { return }
                    continuation.yield(Delivery(index: page, result: .success(rendition)))
                }
            } catch let error as ViewerClientError {
                if current(finishing: true) { continuation.yield(Delivery(index: page, result: .failure(error))) }
            } catch {
                return  // cancelled: the page was swiped past
            }
        }
    }
}
