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

    init(key: RenditionKey, source: SourceFile, spec: RenditionSpec, priority: Priority, sequence: UInt64,
         derivedFrom: [UInt8]? = nil) {
        self.key = key
        self.derivedFrom = derivedFrom
        self.source = source
        self.spec = spec
        self.sequence = sequence
        self.priority = Atomic(priority.rawValue)
    }
}

/// A render that finished, for the event loop to deliver.
struct RenderCompletion: Sendable {
    let job: RenderJob
    let result: Result<Rendition, RenderError>
}

/// What other threads hand to the event loop.
enum LoopEvent: Sendable {
    case rendered(RenderCompletion)
    case preview(RenderJob, Rendition)
    /// A control request finished elsewhere (the store's writer thread).
    case ack(connection: UInt64, requestID: UInt32, count: Int)
}
