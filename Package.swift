// swift-tools-version:6.0
// viewerd: a thumbnail and rendition cache daemon. No package dependencies: everything is
// built from the toolchain's modules and Debian's C libraries (see Makefile `deps`).
import PackageDescription

let package = Package(
    name: "viewerd",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "viewerd", targets: ["viewerd"]),
        .executable(name: "viewerctl", targets: ["viewerctl"]),
        .executable(name: "viewerd-thumbnailer", targets: ["viewerd-thumbnailer"]),
        .executable(name: "viewerd-http", targets: ["viewerd-http"]),
        .library(name: "ViewerClient", targets: ["ViewerClient"]),
        .library(name: "ViewerProtocol", targets: ["ViewerProtocol"]),
        .library(name: "ThumbHash", targets: ["ThumbHash"]),
    ],
    targets: [
        // C libraries from Debian, found with pkg-config.
        .systemLibrary(name: "CVips", pkgConfig: "vips", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        // GLib (libvips depends on it): URIs and MD5s exactly as the desktop computes them (issue 21).
        .systemLibrary(name: "CGLib", pkgConfig: "glib-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // GIO (GLib's): a file's MIME type as the desktop guesses it, for its thumbnailers (issue 21).
        .systemLibrary(name: "CGio", pkgConfig: "gio-2.0", providers: [.apt(["libglib2.0-dev"])]),
        // zlib (libpng's, so libvips'): the cache's RGBA PNGs, written by clients without libvips.
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // sd-bus (libsystemd), the desktop's thumbnail service on D-Bus (issue 21).
        .systemLibrary(name: "CSDBus", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        // libmicrohttpd, viewerd-http's HTTP/1.1 transport (issue 33).
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CSeccomp", pkgConfig: "libseccomp", providers: [.apt(["libseccomp-dev"])]),
        // libjpeg(-turbo) itself, for decoding a progressive JPEG's DC scans alone (issue 16);
        // libvips links it too, but its pkg-config file does not give -ljpeg.
        .systemLibrary(name: "CJPEG", pkgConfig: "libjpeg", providers: [.apt(["libjpeg62-turbo-dev"])]),
        // FFmpeg's libraries, for the poster frames and media info of videos (issue 17).
        .systemLibrary(name: "CFFmpeg", pkgConfig: "libavformat",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswscale-dev", "libavutil-dev"])]),
        // HDR to SDR on 16-bit RGB, for stills and posters alike (issue 31): no library.
        .target(name: "CToneMap"),
        // LibRaw (its thread-safe build), for camera RAW (issue 31).
        .systemLibrary(name: "CLibRaw", pkgConfig: "libraw_r", providers: [.apt(["libraw-dev"])]),
        // libheif itself (libvips links it), for a HEIF's thumbnail item decoded once (issue 32:
        // libvips' loader decoded it three times).
        .systemLibrary(name: "CHeif", pkgConfig: "libheif", providers: [.apt(["libheif-dev"])]),
        // Fixed-arity wrappers of the variadic libvips calls we use (Swift cannot call `...`),
        // and the partial progressive JPEG decode.
        .target(name: "CVipsShim", dependencies: ["CVips", "CJPEG", "CHeif", "CToneMap"]),
        // FFmpeg's video decode (video.c): media info and poster frames as pixels in memory,
        // which Rendering hands to libvips; it knows nothing of libvips (docs/DECISIONS.md).
        // (pkg-config names libavformat alone: the other three are linked here.)
        .target(name: "CFFmpegShim", dependencies: ["CFFmpeg", "CToneMap"],
                linkerSettings: [.linkedLibrary("avcodec"), .linkedLibrary("swscale"), .linkedLibrary("avutil")]),

        // Camera RAW: a RAW's header, embedded preview and development over a descriptor (raw.c).
        .target(name: "CLibRawShim", dependencies: ["CLibRaw"]),

        // The worker's sandbox: libseccomp's variadic rule calls with fixed arguments, and the
        // one-call protections (prctl, setrlimit, unshare); and the desktop thumbnailers' own
        // (helper.c). ViewerDaemon and DesktopThumbnailer import it.
        .target(name: "CSandbox", dependencies: ["CSeccomp"]),

        // The lock every module uses: a pthread mutex ThreadSanitizer can see (docs/DECISIONS.md).
        .target(name: "Locking"),
        // The log lines (`level=info event=… key=value`, journald's priorities) of the daemon and
        // of viewerd-thumbnailer alike; the front links this, not the daemon.
        .target(name: "ViewerLog", dependencies: ["Locking"]),
        // An HTTP request and response as values: the contract between viewerd-http's transport and
        // its rules (issue 33). No I/O.
        .target(name: "HTTPMessage"),
        // MHD_start_daemon and MHD_get_connection_info are variadic, its logger takes a va_list:
        // fixed-arity wrappers, nothing else (HTTPServer calls the rest of libmicrohttpd itself).
        .target(name: "CMicroHTTPDShim", dependencies: ["CMicroHTTPD"]),
        // viewerd-http's transport: listening sockets, limits per client, asynchronous replies
        // over libmicrohttpd. The only module that imports it.
        .target(name: "HTTPServer", dependencies: ["HTTPMessage", "CMicroHTTPD", "CMicroHTTPDShim", "SystemCalls", "Locking", "ViewerLog"]),
        // The IIIF Image API's rules (issue 33): URL to request, the plan for the daemon, info.json,
        // status, headers, caching, identifiers under roots, signed URLs. Passive: values in,
        // values out, no sockets; the resolver's stat and realpath are its only file-system reads.
        .target(name: "IIIF", dependencies: ["HTTPMessage", "ViewerProtocol", "Locking", "SystemCalls"]),
        // Wire format: frames, messages, codes. No I/O, no C.
        .target(name: "ViewerProtocol"),
        // ThumbHash, the placeholders of INFO_REPLY: encoded by the workers, decoded by the clients.
        // Pure Swift, no C of its own (libm's cos), no I/O.
        .target(name: "ThumbHash"),
        // The formats viewerd reads, one table (signature, name, MIME types, kind, cost class,
        // decoder, renderer version): no C, so the clients read it without linking libvips.
        .target(name: "MediaFormats"),
        // The only product module that talks to libvips (RenderingFixtures, test-only, writes with it too).
        .target(name: "Rendering", dependencies: ["ViewerProtocol", "MediaFormats", "ThumbHash", "CVipsShim", "CFFmpegShim", "CLibRawShim",
                                                 "Locking"]),
        // The only module that talks to LMDB.
        .target(name: "RenditionStore", dependencies: ["CLMDB", "CChecksum", "Locking"]),
        // CRC-32C with the CPU's instruction, for verifying stored renditions.
        .target(name: "CChecksum"),
        // Server, scheduler, render execution, configuration.
        .target(name: "ViewerDaemon", dependencies: ["ViewerProtocol", "MediaFormats", "Rendering", "RenditionStore", "SystemCalls", "CSandbox", "Locking",
                                                    "ViewerLog"]),
        // epoll, eventfd, signalfd, SO_PEERCRED: Linux calls Swift's Glibc does not export.
        .target(name: "CPosix"),
        // The one layer of system-call wrappers every target uses: EINTR retried, typed errno,
        // EBADF and EFAULT trap (docs/STYLE: Wrapping C).
        .target(name: "SystemCalls", dependencies: ["CPosix"]),
        // Client library for viewers and for viewerctl. A viewer depends on clients/ViewerClient, the
        // package of it and its dependencies alone (the same sources), not on this one.
        .target(name: "ViewerClient", dependencies: ["ViewerProtocol", "ThumbHash", "SystemCalls", "Locking"]),
        // The freedesktop Thumbnail Managing Standard's cache (~/.cache/thumbnails), written and
        // read as GNOME, KDE and Xfce apps expect (issue 21).
        .target(name: "FreedesktopThumbnails", dependencies: ["CGLib", "CZlib", "ViewerProtocol"]),

        // The desktop's thumbnail of a file, bus-free: the cache checked, the daemon's pixels or a
        // desktop thumbnailer's, the standard's PNG written. viewerd-thumbnailer's and
        // `viewerctl export-xdg`'s; no sd-bus, no GIO (the MIME guess is the bus front's).
        .target(name: "DesktopThumbnails", dependencies: ["CSandbox", "FreedesktopThumbnails", "MediaFormats", "ViewerClient", "ViewerProtocol",
                                                        "SystemCalls", "Locking", "ViewerLog"]),

        // The D-Bus Thumbnailer1 and Cache1 objects: sd-bus's vtable macros, which Swift cannot expand.
        .target(name: "CDBusShim", dependencies: ["CSDBus"]),
        // The desktop's thumbnail service: Thumbnailer1 and Cache1 on the session bus, a front
        // of the daemon writing the freedesktop cache (issue 21). `ThumbnailQueue` holds
        // Thumbnailer1's rules, passive; `ThumbnailerService` is their sd-bus shell.
        .target(name: "DesktopThumbnailer", dependencies: ["CSDBus", "CDBusShim", "CGio", "DesktopThumbnails", "FreedesktopThumbnails",
                                                         "ViewerClient", "ViewerProtocol", "SystemCalls", "Locking", "ViewerLog"]),

        .executableTarget(name: "viewerd", dependencies: ["ViewerDaemon"]),
        .executableTarget(name: "viewerd-thumbnailer", dependencies: ["DesktopThumbnailer", "DesktopThumbnails", "FreedesktopThumbnails",
                                                                  "ViewerClient", "ViewerLog"]),
        // The HTTP front (issue 33): IIIF over HTTPServer, a client of the daemon as viewerd-thumbnailer is.
        .executableTarget(name: "viewerd-http", dependencies: ["HTTPServer", "HTTPMessage", "IIIF", "ViewerClient", "ViewerProtocol", "SystemCalls",
                                                           "Locking", "ViewerLog"]),
        .executableTarget(name: "viewerctl", dependencies: ["ViewerClient", "ViewerProtocol", "MediaFormats", "SystemCalls", "Locking", "FreedesktopThumbnails",
                                                    "DesktopThumbnails"]),
        // ViewerDaemon: its stores are filled under the daemon's own keys (Store/RenditionKeys.swift).
        .executableTarget(name: "viewerd-bench", dependencies: ["ViewerDaemon", "ViewerProtocol", "MediaFormats", "RenditionStore", "Rendering", "SystemCalls", "Locking", "HTTPMessage",
                                                         "ViewerTestSupport", "FreedesktopThumbnails", "RenderingFixtures"]),
        // make torture: hostile files, clients, load and faults against the real daemon (issue 9).
        .executableTarget(name: "viewerd-torture", dependencies: ["ViewerProtocol", "MediaFormats", "Rendering", "SystemCalls", "Locking", "HTTPMessage",
                                                           "ViewerTestSupport", "RenderingFixtures"]),

        // What the tests, the bench and the torture share: the daemon launcher, the raw wire
        // client, the seeded generator. Not a product; test-only faults stay out of it.
        .target(name: "ViewerTestSupport", dependencies: ["ViewerClient", "ViewerProtocol", "SystemCalls", "Locking", "HTTPMessage"]),
        // The fixtures' writers of the tests, the bench and the torture: pixels written and
        // decoded through libvips (ImageFixtures), hand-written PDFs (TestDocuments). Linked by
        // no product: make build builds viewerd, viewerctl and viewerd-thumbnailer without it.
        .target(name: "RenderingFixtures", dependencies: ["Rendering", "CVipsShim", "CVipsFixtures"]),
        // The fixtures' libvips writer and decoder, in C: test-only, apart from CVipsShim.
        .target(name: "CVipsFixtures", dependencies: ["CVips"]),

        // FuzzRegressions/: inputs kept by the fuzz target (make torture), read by FuzzRegressionTests.
        .testTarget(name: "ViewerProtocolTests", dependencies: ["ViewerProtocol", "ThumbHash", "ViewerTestSupport"], exclude: ["FuzzRegressions"]),
        .testTarget(name: "RenderingTests", dependencies: ["Rendering", "RenderingFixtures", "CToneMap", "MediaFormats", "ViewerProtocol", "ViewerTestSupport"]),
        .testTarget(name: "RenditionStoreTests", dependencies: ["RenditionStore", "Locking", "ViewerTestSupport"]),
        .testTarget(name: "ViewerDaemonTests", dependencies: ["ViewerDaemon", "ViewerProtocol", "MediaFormats", "SystemCalls", "Locking", "Rendering", "RenditionStore", "ViewerTestSupport",
                                                         "ViewerLog"]),
        .executableTarget(name: "store-crash-writer", dependencies: ["RenditionStore", "ViewerTestSupport"], path: "Tests/StoreCrashWriter"),
        // make test, make torture: viewerd with the tests' faults (workers that crash, hang or
        // try a forbidden call on files so named; a small store map, a fast sweep), which the
        // product has none of. Built by `swift build`, not by make build or make install.
        .executableTarget(name: "viewerd-testing", dependencies: ["ViewerDaemon", "Rendering"], path: "Tests/DaemonTesting"),
        // bench/cost-model.sh: the daemon's cost estimate of a file, beside its measured peak.
        .executableTarget(name: "viewerd-cost-estimate", dependencies: ["ViewerDaemon", "Rendering", "ViewerProtocol"],
                          path: "Tests/CostEstimate"),
        .testTarget(name: "EndToEndTests", dependencies: ["ViewerClient", "ViewerProtocol", "MediaFormats", "Rendering", "RenderingFixtures", "SystemCalls",
                                                        "ViewerTestSupport", "FreedesktopThumbnails"]),
        .testTarget(name: "ViewerClientTests", dependencies: ["ViewerClient", "ViewerProtocol", "SystemCalls", "Locking"]),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls"]),
        .testTarget(name: "ThumbHashTests", dependencies: ["ThumbHash"]),
        .testTarget(name: "IIIFTests", dependencies: ["IIIF", "HTTPMessage", "ViewerProtocol"]),
        .testTarget(name: "DesktopThumbnailerTests", dependencies: ["DesktopThumbnailer", "DesktopThumbnails", "MediaFormats", "ViewerTestSupport"]),
        .testTarget(name: "HTTPServerTests", dependencies: ["HTTPServer", "HTTPMessage", "SystemCalls", "Locking", "ViewerTestSupport"]),
        .testTarget(name: "FreedesktopThumbnailsTests", dependencies: ["FreedesktopThumbnails", "Rendering", "RenderingFixtures", "ViewerTestSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
