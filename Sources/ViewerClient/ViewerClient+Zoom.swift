import ViewerProtocol

extension ViewerClient {
    /// A zoomable view of the image at `path`: its upright size from INFO, then its tile
    /// pyramid (see `ZoomedImage`). The tiles are renditions like any other, cached and
    /// shared with every viewer that asks for the same grid.
    ///
    /// - Throws: what `info(path:)` throws, and `ViewerClientError.unsupported` for a video
    ///   (its poster is a rendition; tiles are for still images and documents).
    ///
    /// ```swift
    /// let image = try await client.zoomedImage(path: "/pictures/big.jpg", format: .webp)
    /// image.update(viewport: (x: 0, y: 0, width: Double(image.pyramid.width),
    ///                         height: Double(image.pyramid.height)), scale: 0.36)
    /// ```
    public func zoomedImage(path: String, tileSize: Int = 256, overlap: Int = 1, format: OutputFormat = .jpeg,
                            quality: UInt8 = 0) async throws -> ZoomedImage {
        // A server without `zoom` would ignore the tile and send the whole image for each.
        guard try await server.capabilities.contains(.zoom) else { throw ViewerClientError.unsupported(Capabilities.zoom.names) }
        guard TileAddress.sizes.contains(UInt16(clamping: tileSize)), TileAddress.overlaps.contains(UInt8(clamping: overlap)) else {
            throw ViewerClientError.invalidArgument("tiles are 256 or 512 pixels with an overlap of 0 or 1, not \(tileSize)/\(overlap)")
        }
        let info = try await info(path: path)
        guard info.kind != .video else { throw ViewerClientError.unsupported("tiles are not for videos (\(path))") }
        guard info.width > 0, info.height > 0 else {
            throw ViewerClientError.unsupported("\(path) has no size to cut tiles from (\(info.width)x\(info.height))")
        }
        return ZoomedImage(client: self, path: path, width: Int(info.width), height: Int(info.height),
                           tileSize: tileSize, overlap: overlap, format: format, quality: quality)
    }
}
