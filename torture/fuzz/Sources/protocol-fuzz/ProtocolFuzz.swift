import ViewerProtocol

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data, size > 0 else { return 0 }
    // A failed check traps: a crash libFuzzer keeps (so do overflows and bad indexes).
    FuzzInput.run(Array(UnsafeBufferPointer(start: data, count: size))) { preconditionFailure($0) }
    return 0
}

/// SwiftPM links an executable target's entry point as `<module>_main` and points `main` at
/// it; hand control to libFuzzer's driver from there (its own main is then not linked in).
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<Int32>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32) -> Int32

@_cdecl("protocol_fuzz_main")
public func protocolFuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
    var count = argc
    var vector = argv
    return LLVMFuzzerRunDriver(&count, &vector) { data, size in fuzzOneInput(data, size) }
}
