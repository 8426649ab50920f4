// LibRaw 0.20 keeps where the sensor data and the embedded preview lie in its C++ object's
// internal data (libraw_internal.h), which its C API does not give; libraw_data_t's
// parent_class is that object. Read-only, right after libraw_open_buffer.
#include "raw_extents.h"

namespace {
// A view of LibRaw's protected internals: adds no state, so the object LibRaw made is read as it is.
struct Internals : LibRaw {
    static const Internals *of(libraw_data_t *raw) {
        return static_cast<const Internals *>(static_cast<LibRaw *>(raw->parent_class));
    }
    vr_extents extents() const {
        const auto &unpacker = libraw_internal_data.unpacker_data;
        return {unpacker.data_offset, unpacker.data_size, libraw_internal_data.internal_data.toffset};
    }
};
}

extern "C" vr_extents vr_extents_of(libraw_data_t *raw) { return Internals::of(raw)->extents(); }
