import Foundation
import Rendering
import RenditionStore
import Synchronization
import ViewerProtocol

/// One unit of render work: one rendition key, whoever waits for it.
/// Owned by the event loop; the worker slots only read its immutable parts and its atomics.
final class RenderJob: Sendable {
    let key: RenditionKey
    let source: SourceFile
    let spec: RenditionSpec
    let sequence: UInt64
    /// The job's priority: the highest among its waiters. Read by the worker slots when they
    /// pick work, raised by the event loop when a more urgent waiter joins.
    let priority: Atomic<UInt8>
    var currentPriority: Priority { Priority(rawValue: priority.load(ordering: .relaxed)) ?? .normal }

    /// Some waiter accepts degraded previews before the final rendition.
    let wantsPreview = Atomic<Bool>(false)

    /// A larger stored rendition of the same source to render from instead of the original
    /// (a derivation), when that is cheaper.
    let derivedFrom: [UInt8]?
    /// The estimated memory and costliness the scheduler admits it by.
    let cost: RenderCost

    init(key: RenditionKey, source: SourceFile, spec: RenditionSpec, priority: Priority, sequence: UInt64,
         cost: RenderCost = RenderCost(memoryBytes: 0, costly: false), derivedFrom: [UInt8]? = nil) {
        self.key = key
        self.cost = cost
        self.derivedFrom = derivedFrom
        self.source = source
        self.spec = spec
        self.sequence = sequence
        self.priority = Atomic(priority.rawValue)
    }

    /// Sets what the in-flight table decided: the priority of its most urgent waiter, and
    /// whether one of them wants a preview.
    func retune(priority: Priority, wantsPreview: Bool) {
        self.priority.store(priority.rawValue, ordering: .relaxed)
        self.wantsPreview.store(wantsPreview, ordering: .relaxed)
    }
}

/// How a job ended in the pool.
enum JobOutcome: Sendable {
    case rendered(Rendition)
    case failed(RenderError, cause: FailureCause)
    /// It stopped because it was asked to (its waiters left, as far as the pool knows).
    case cancelled
}

/// What other threads hand to the event loop.
enum LoopEvent: Sendable {
    case preview(RenderJob, Rendition)
    /// Exactly once for every job the pool took from its scheduler.
    case finished(RenderJob, JobOutcome)
    /// A control request finished elsewhere (the store's writer thread).
    case ack(connection: UInt64, requestID: UInt32, count: Int)
}
