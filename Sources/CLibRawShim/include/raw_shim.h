// Camera RAW through LibRaw (issue 31): a file's header, its embedded preview and its
// development, read from a descriptor the daemon opened (mapped read-only: LibRaw opens
// nothing). No libvips here: the Rendering module hands the bytes and pixels to libvips.
#ifndef VIEWERD_RAW_SHIM_H
#define VIEWERD_RAW_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// What a RAW file's headers say, no pixel read.
typedef struct {
    int width;            // the developed photo, before `orientation` turns it
    int height;
    int orientation;      // EXIF-style 1-8, from LibRaw's sizes.flip (the RAW's own, not the preview's)
    int preview_kind;     // VR_PREVIEW_*
    int preview_width;    // as the file declares it (0 when it does not say)
    int preview_height;
    int is_dng;
    char make[64];        // the camera's maker and model, as LibRaw names them
    char model[64];
} vr_info;

/// Kinds of embedded preview.
enum {
    VR_PREVIEW_NONE = 0,
    VR_PREVIEW_JPEG = 1,    // a JPEG (the common case: 1-24 MP)
    VR_PREVIEW_BITMAP = 2,  // 8-bit or 16-bit RGB or grey pixels (a DNG's IFD0 thumbnail)
    VR_PREVIEW_OTHER = 3,   // a format LibRaw cannot give (Sinar's layers, Rollei's): not used
    VR_PREVIEW_UNPACKED = 4,  // one whose format LibRaw learns only by reading it (a DNG's)
};

/// Return codes: 0 success; VR_UNSUPPORTED no RAW LibRaw reads (or no preview of that kind);
/// VR_DAMAGED cut or corrupt; VR_TOO_LARGE over `max_pixels` or LibRaw's memory limit;
/// VR_CANCELLED the caller's check said stop; VR_TRUNCATED the file ends before the data its
/// directories declare (checked on every call: a cut RAW is refused even where its preview is
/// whole). A sensor larger than 16 pixels a byte of the file is VR_DAMAGED (a lying header).
/// `message` says why.
enum {
    VR_UNSUPPORTED = -2,
    VR_DAMAGED = -1,
    VR_TOO_LARGE = -3,
    VR_CANCELLED = -4,
    VR_TRUNCATED = -5,
};

/// Polled during a development; returns nonzero to stop it.
typedef int (*vr_cancel_fn)(void *context);

/// An image LibRaw made, in malloc'd memory: the caller frees `data` with vr_free.
typedef struct {
    uint8_t *data;
    size_t length;
    int kind;       // VR_PREVIEW_JPEG: `data` is a JPEG file; else packed pixels
    int width;      // pixels only
    int height;
    int bands;      // 1 or 3
    int bits;       // 8 or 16 (16: native-endian uint16)
} vr_image;

/// Reads the headers of the RAW open on `fd` (mapped read-only, not closed).
int vr_info_fd(int fd, vr_info *out, char *message, size_t message_length);

/// The embedded preview (the largest the file has, LibRaw's choice), unturned.
/// VR_UNSUPPORTED when there is none or it is of VR_PREVIEW_OTHER's kind; VR_TOO_LARGE when
/// it declares more than `max_pixels`; VR_TRUNCATED when its bytes run past the file's end.
int vr_preview_fd(int fd, int64_t max_pixels, vr_image *out, char *message, size_t message_length);

/// Develops the RAW (camera white balance, sRGB, 8-bit, unturned): at half size (each 2x2
/// Bayer block one pixel, no demosaic: a quarter of the work) or whole. Refused when the
/// sensor has more than `max_pixels`.
int vr_develop_fd(int fd, int half, int64_t max_pixels, vr_cancel_fn cancel, void *cancel_context,
                  vr_image *out, char *message, size_t message_length);

void vr_free(void *p);

#endif
