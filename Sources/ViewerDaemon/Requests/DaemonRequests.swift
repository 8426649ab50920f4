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

    static func keys(of spec: RenditionSpec, source: SourceFile) -> (key: RenditionKey, job: RenditionKey) {
        // Every request passes here: the identity and the spec are encoded once, and again
        // only for a tile, whose job is its whole level's.
        let identity = source.identity.bytes, version = Renderer.version(of: source.signature)
        let key = RenditionKey(source: identity, spec: spec.keyBytes, rendererVersion: version)
        return (key, spec.tile == nil ? key : RenditionKey.job(of: spec, identity: identity, version: version))
    }

    static func jobKeys(of spec: RenditionSpec, identity: AssetIdentity) -> [RenditionKey] {
        RenditionKey.versions.map { RenditionKey.job(of: spec, identity: identity.bytes, version: $0) }
    }

    static func identity(of source: SourceFile) -> AssetIdentity { source.identity }

    static func path(of source: SourceFile) -> String { source.path }

    static func isDerived(_ job: RenderJob) -> Bool { job.derivedFrom != nil }
}

typealias Requests = RequestTable<DaemonRequests>
