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
        .library(name: "ViewerClient", targets: ["ViewerClient"]),
        .library(name: "ViewerProtocol", targets: ["ViewerProtocol"]),
    ],
    targets: [
        // C libraries from Debian, found with pkg-config.
        .systemLibrary(name: "CVips", pkgConfig: "vips", providers: [.apt(["libvips-dev"])]),
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        // Fixed-arity wrappers of the variadic libvips calls we use (Swift cannot call `...`).
        .target(name: "CVipsShim", dependencies: ["CVips"]),

        // The lock every module uses: a pthread mutex ThreadSanitizer can see (docs/DECISIONS.md).
        .target(name: "Locking"),
        // Wire format: frames, messages, codes. No I/O, no C.
        .target(name: "ViewerProtocol"),
        // The only module that talks to libvips.
        .target(name: "Rendering", dependencies: ["ViewerProtocol", "CVipsShim", "Locking"]),
        // The only module that talks to LMDB.
        .target(name: "RenditionStore", dependencies: ["CLMDB", "CChecksum", "Locking"]),
        // CRC-32C with the CPU's instruction, for verifying stored renditions.
        .target(name: "CChecksum"),
        // Server, scheduler, render execution, configuration.
        .target(name: "ViewerDaemon", dependencies: ["ViewerProtocol", "Rendering", "RenditionStore", "CPosix", "Locking"]),
        // epoll, eventfd, signalfd, SO_PEERCRED: Linux calls Swift's Glibc does not export.
        .target(name: "CPosix"),
        // Client library for viewers and for viewerctl.
        .target(name: "ViewerClient", dependencies: ["ViewerProtocol", "CPosix", "Locking"]),

        .executableTarget(name: "viewerd", dependencies: ["ViewerDaemon"]),
        .executableTarget(name: "viewerctl", dependencies: ["ViewerClient", "ViewerProtocol", "Locking"]),
        .executableTarget(name: "viewerd-bench", dependencies: ["ViewerProtocol", "RenditionStore", "Rendering"]),
        // make torture: hostile files, clients, load and faults against the real daemon (issue 9).
        .executableTarget(name: "viewerd-torture", dependencies: ["ViewerProtocol", "Rendering", "CPosix"]),

        // FuzzRegressions/: inputs kept by the fuzz target (make torture), read by FuzzRegressionTests.
        .testTarget(name: "ViewerProtocolTests", dependencies: ["ViewerProtocol"], exclude: ["FuzzRegressions"]),
        .testTarget(name: "RenderingTests", dependencies: ["Rendering", "ViewerProtocol"]),
        .testTarget(name: "RenditionStoreTests", dependencies: ["RenditionStore", "Locking"]),
        .testTarget(name: "ViewerDaemonTests", dependencies: ["ViewerDaemon", "ViewerProtocol", "Rendering", "RenditionStore", "Locking"]),
        .executableTarget(name: "store-crash-writer", dependencies: ["RenditionStore"], path: "Tests/StoreCrashWriter"),
        .testTarget(name: "EndToEndTests", dependencies: ["ViewerClient", "ViewerProtocol", "Rendering", "CPosix"]),
        .testTarget(name: "ViewerClientTests", dependencies: ["ViewerClient", "ViewerProtocol", "Locking"]),
    ],
    swiftLanguageModes: [.v6]
)
