import CVipsShim

/// Owns one reference to a libvips image.
final class VipsImageRef {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    var size: (width: Int, height: Int, bands: Int) {
        var w: Int32 = 0, h: Int32 = 0, b: Int32 = 0
        vs_image_size(pointer, &w, &h, &b)
        return (Int(w), Int(h), Int(b))
    }

    /// The image is tagged with an sRGB profile (`ICCProfile.isSRGB`): the saver writes its
    /// pixels as they are, where another profile's are converted through it.
    var profileIsSRGB: Bool {
        var data: UnsafeRawPointer?
        var length = 0
        return withExtendedLifetime(self) {
            guard vs_image_icc(pointer, &data, &length) != 0, let data else { return false }
            return ICCProfile.isSRGB(UnsafeRawBufferPointer(start: data, count: length))
        }
    }

    deinit { vs_unref(pointer) }
}

/// libvips' error buffer is global to the process: take it right after the failing call.
/// `package`: RenderingFixtures' writers report libvips' errors too.
package func takeVipsError() -> String {
    guard let text = vs_error_take() else { return "" }
    defer { vs_free(text) }
    return String(cString: text).trimmingTrailingWhitespace()
}

extension String {
    func trimmingTrailingWhitespace() -> String {
        var s = Substring(self)
        while let last = s.last, last.isWhitespace { s.removeLast() }
        return String(s)
    }
}
