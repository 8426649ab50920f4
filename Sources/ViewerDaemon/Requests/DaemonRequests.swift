import Rendering
import RenditionStore
import ViewerProtocol

/// The daemon's request table: renditions by `RenditionKey`, open `SourceFile`s, the pool's
/// `RenderJob`s, media info for INFO, and a miss's stored siblings (`StoreMiss`).
enum DaemonRequests: RequestKinds {
    typealias Key = RenditionKey
    typealias Source = SourceFile
    typealias Identity = AssetIdentity
    typealias Sniffed = HeaderSniffer.Sniffed
    typealias Job = RenderJob
    typealias Output = JobRendition
    typealias Info = MediaInfo
    typealias Stored = StoreMiss

    static func keys(of spec: RenditionSpec, identity: AssetIdentity) -> (key: RenditionKey, job: RenditionKey) {
        // Every request passes here: the identity and the spec are encoded once, and again
        // only for a tile, whose job is its whole level's.
        let identity = identity.bytes, key = RenditionKey(identity: identity, spec: spec)
        return (key, spec.tile == nil ? key : RenditionKey.job(of: spec, identity: identity))
    }

    static func identity(of source: SourceFile) -> AssetIdentity { source.identity }

    static func path(of source: SourceFile) -> String { source.path }

    static func isDerived(_ job: RenderJob) -> Bool { job.derivedFrom != nil }
}

typealias Requests = RequestTable<DaemonRequests>
