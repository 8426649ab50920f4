import Foundation
import SystemCalls
import ViewerProtocol

extension ViewerClient {
    /// What a file is, for laying out a grid or a pager before any pixels (INFO): its kind
    /// (photo, video, vector, animated), upright size, a video's duration, frames or pages,
    /// and format. From the file's header, read once and then kept in the daemon's cache
    /// with the file's identity, so asking again costs a round trip.
    ///
    /// As with `render(_:spec:…)`, a relative path is resolved here, and a daemon of another
    /// user gets a descriptor of the file instead of its path.
    ///
    /// - Throws: `ViewerClientError.server` with the daemon's code (`not-found`,
    ///   `permission-denied`, `unsupported-format`, `corrupt-image`…), `.unsupported` when
    ///   the daemon does not announce `media-info`, `.connectionClosed`.
    ///
    /// ```swift
    /// let info = try await client.info(path: "/pictures/a.jpg")
    /// cell.aspectRatio = Double(info.width) / Double(info.height)
    /// ```
    public func info(path: String) async throws -> MediaInfo {
        let path = path.hasPrefix("/") ? path
            : URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath,
                                                         isDirectory: true)).standardizedFileURL.path
        if try await daemonIsAnotherUser, let descriptor = try? Posix.openForReading(path) {
            return try await info(InfoRequest(path: path), descriptor: descriptor)  // the connection owns it
        }
        return try await info(InfoRequest(path: path), descriptor: nil)
    }

    /// The media info of the file open at `descriptor` (passed to the daemon, which proves
    /// the caller may read it). The client duplicates `descriptor`, whose offset the daemon
    /// moves as it reads; `path` only names the file.
    ///
    /// ```swift
    /// let info = try await client.info(descriptor: fd, path: url.path)
    /// ```
    public func info(descriptor: Int32, path: String) async throws -> MediaInfo {
        let copy: Int32
        do throws(SystemError) {
            copy = try Posix.duplicate(descriptor)
        } catch {
            throw ViewerClientError.invalidArgument("cannot duplicate descriptor \(descriptor): \(error.code)")
        }
        return try await info(InfoRequest(path: path), descriptor: copy)
    }

    private func info(_ request: InfoRequest, descriptor: Int32?) async throws -> MediaInfo {
        switch try await call(.info(request), requires: .mediaInfo, descriptor: descriptor) {
        case .infoReply(let info): return info
        case let other: throw ViewerClientError.protocolViolation("expected INFO_REPLY, got \(other.type)")
        }
    }
}
