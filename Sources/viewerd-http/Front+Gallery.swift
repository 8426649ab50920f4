import HTTPMessage
import HTTPServer
import IIIF
import ViewerClient
import ViewerProtocol

/// The web gallery (`GalleryFront`, passive) and the media files (`MediaFront`) run here: the
/// page's files and the media's byte ranges are read on the cooperative pool (never on MHD's
/// threads), a layout is the daemon's LAYOUT of the folder, collected to its end and sent as
/// one JSON; a client that goes away cancels it (the stream's end sends CANCEL).
extension Front {
    func serveGallery(_ request: HTTPRequest, reply: HTTPReply) {
        let client = client, gallery = GalleryFront(galleryConfiguration)
        let task = Task {
            switch gallery.handle(request) {
            case .respond(let response):
                reply.send(response)
            case .layout(let need):
                reply.send(need.answer(await Self.layout(need.request, client: client)))
            }
        }
        reply.onClientGone { task.cancel() }
    }

    func serveMedia(_ request: HTTPRequest, reply: HTTPReply) {
        let media = MediaFront(roots: iiifConfiguration.roots)
        let task = Task { reply.send(media.handle(request)) }
        reply.onClientGone { task.cancel() }
    }

    var galleryConfiguration: GalleryConfiguration {
        GalleryConfiguration(roots: iiifConfiguration.roots, webDirectory: options.webDirectory)
    }

    /// Every batch of the LAYOUT, as one (the total of the last, the items in order).
    private static func layout(_ request: LayoutRequest, client: ViewerClient) async -> Result<LayoutItems, IIIFDaemonError> {
        var all = LayoutItems(total: 0, items: [])
        do {
            for try await batch in client.layout(request) {
                all.total = batch.total
                all.items += batch.items
            }
            return .success(all)
        } catch ViewerClientError.server(let reply) {
            return .failure(reply.code.map { .daemon($0, reply.message) } ?? .unavailable(reply.message))
        } catch {
            return .failure(.unavailable("\(error)"))
        }
    }
}
