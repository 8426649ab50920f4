// swift-tools-version:6.0
// The client libraries alone, for a viewer's Package.swift: `.package(path: "…/viewerd/clients/ViewerClient")`.
// The same sources as the daemon's package (Sources is a link to them), without its C system
// libraries: SwiftPM asks pkg-config about every system library of a package graph, used or not,
// so depending on the whole package printed libvips' and GIO's `-pthread` as "prohibited flag(s)"
// in every viewer's build (issue 36).
import PackageDescription

let package = Package(
    name: "ViewerClient",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "ViewerClient", targets: ["ViewerClient"]),
        .library(name: "ViewerProtocol", targets: ["ViewerProtocol"]),
        .library(name: "ThumbHash", targets: ["ThumbHash"]),
    ],
    targets: [
        .target(name: "CPosix"),
        .target(name: "SystemCalls", dependencies: ["CPosix"]),
        .target(name: "Locking"),
        .target(name: "ViewerProtocol"),
        .target(name: "ThumbHash"),
        .target(name: "ViewerClient", dependencies: ["ViewerProtocol", "ThumbHash", "SystemCalls", "Locking"]),
    ],
    swiftLanguageModes: [.v6]
)
