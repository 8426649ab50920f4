// swift-tools-version:6.0
// libFuzzer target over viewerd's frame decoder and message parser (issue 9). A package of
// its own so that the main build never sees -sanitize=fuzzer: `make fuzz` builds it with
//   swift build -c release --package-path torture/fuzz -Xswiftc -sanitize=fuzzer,address
// Sources/ViewerProtocol is a symbolic link to the real module's sources, compiled here
// with the fuzzer's coverage instrumentation.
import PackageDescription

let package = Package(
    name: "viewerd-fuzz",
    targets: [
        .target(name: "ViewerProtocol", path: "Sources/ViewerProtocol"),
        // -parse-as-library: no top-level code; the entry point calls libFuzzer's driver.
        .executableTarget(name: "protocol-fuzz", dependencies: ["ViewerProtocol"], path: "Sources/protocol-fuzz",
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
    ],
    swiftLanguageModes: [.v6]
)
