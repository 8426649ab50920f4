// Where a RAW's sensor data and embedded preview lie in the file (raw_extents.cpp), which
// LibRaw 0.20's C API does not say: the checks that a file holds what its header promises.
#ifndef VIEWERD_RAW_EXTENTS_H
#define VIEWERD_RAW_EXTENTS_H

#include <libraw/libraw.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int64_t data_offset;      // the sensor data's first byte
    int64_t data_size;        // its bytes as the directory declares them (0: LibRaw did not learn it)
    int64_t preview_offset;   // the embedded preview's first byte (its length is thumbnail.tlength)
} vr_extents;

/// The extents LibRaw found while opening `raw` (libraw_open_buffer succeeded).
vr_extents vr_extents_of(libraw_data_t *raw);

#ifdef __cplusplus
}
#endif

#endif
