// Fixed-arity wrappers around the variadic libvips calls viewerd uses, one .c file per concern
// (shim_private.h lists them).
// Swift cannot call C functions with `...`, so every option is an explicit argument here.
// VipsImage stays opaque to Swift: only this shim and the Rendering module see it.
#ifndef VIEWERD_VIPS_SHIM_H
#define VIEWERD_VIPS_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef struct _VipsImage VipsImage;
/// One render's cancel request (see vs_cancel_new).
typedef struct vs_cancel vs_cancel;

/// Output encodings, matching ViewerProtocol.OutputFormat raw values.
enum {
    VS_FORMAT_JPEG = 1,
    VS_FORMAT_WEBP = 2,
    VS_FORMAT_PNG = 3,
    VS_FORMAT_AVIF = 4,
    VS_FORMAT_RAW = 5,
    VS_FORMAT_GIF = 6,
};

/// Colour modes, matching ViewerProtocol.ColourMode raw values.
enum {
    VS_COLOUR_COLOUR = 0,
    VS_COLOUR_GRAY = 1,
    VS_COLOUR_BITONAL = 2,
};

/// What a rendition's pixels go through after the resize, before the save (transform.c), in
/// IIIF's order: mirrored left to right, turned `rotation` degrees clockwise (0-359), then
/// recoloured (`colour`, a VS_COLOUR_*). All zero: the pixels as they are.
typedef struct {
    int rotation;
    int mirror;
    int colour;
} vs_transform;

/// Crop anchors for fill mode (0 = no crop: fit inside the box).
enum {
    VS_CROP_NONE = 0,
    VS_CROP_CENTRE = 1,
    VS_CROP_ATTENTION = 2,
    VS_CROP_ENTROPY = 3,
};

/// Start libvips once per process: operation cache off, one thread per render,
/// untrusted loaders (ImageMagick, FITS, raw, ...) blocked except those we allow.
/// Returns 0 on success.
int vs_init(const char *argv0, int allow_svg, int allow_pdf, int allow_jxl, int allow_jp2k);

/// Release libvips' per-thread state; call on threads that rendered before they end.
void vs_thread_shutdown(void);

/// Takes (copies and clears) libvips' process-global error buffer; when that is empty, the
/// last libvips warning since vs_errors_reset (some loaders only warn). Never NULL.
/// The caller frees the result with vs_free.
char *vs_error_take(void);
/// Clears the error buffer and the kept warning, before a render.
void vs_errors_reset(void);
void vs_free(void *p);
void vs_unref(VipsImage *image);

/// What the header of a source says, read without decoding pixels.
typedef struct {
    int width;
    int height;
    int bands;
    int pages;          // frames or pages; 1 when the format has none
    int bits;           // bits per sample
    int orientation;    // EXIF orientation 1-8 (1 when absent)
    int interlaced;     // progressive JPEG / interlaced PNG
    int has_icc;        // an embedded ICC profile
    uint8_t *icc;       // ... a copy of it (NULL when none), to be freed with vs_free
    size_t icc_length;
    int cmyk;           // CMYK pixels
    char loader[48];    // libvips loader nickname, e.g. "jpegload_source"
    double xres, yres;  // pixels per mm, as the loader gives them (a JPEG's JFIF or EXIF density)
} vs_header;

/// Reads the header from an open file descriptor (the descriptor is not closed). On success
/// the caller frees `out->icc` with vs_free.
int vs_header_fd(int fd, vs_header *out);

/// Shrink-on-load thumbnail from an open file descriptor (not closed) or from memory.
/// width/height: the box; size: 0 both, 1 up only, 2 down only, 3 force.
/// to_srgb: convert through the embedded ICC profile to sRGB (the output is stripped of
/// profiles, so colours must be sRGB when it is written).
/// `fail_on_truncated`: a source cut short (libvips' VIPS_FAIL_ON_TRUNCATED: a JPEG, PNG or
/// GIF whose data ends early) fails when its pixels are computed, instead of decoding what is
/// missing as grey; 0 decodes it as far as it goes.
/// `cancel` (may be NULL): once requested, the source's reads fail, which stops a decode
/// that libvips' kill flag cannot reach.
int vs_thumbnail_fd(int fd, int width, int height, int crop, int size, int page, int to_srgb,
                    int fail_on_truncated, vs_cancel *cancel, VipsImage **out);
int vs_thumbnail_buffer(const void *buf, size_t len, int width, int height, int crop, int size,
                        int page, int to_srgb, VipsImage **out);

/// A thumbnail of an image already in memory, as vs_thumbnail_fd makes it from a source
/// (same box, crop, size and colour conversion; turned by the image's orientation).
int vs_thumbnail_image(VipsImage *in, int width, int height, int crop, int size, int to_srgb, VipsImage **out);

/// A progressive JPEG (grey or YCbCr) decoded at scale 1/8 into memory from only the scans
/// that scale reads: every component libjpeg inverse-transforms with its 1x1 IDCT needs only
/// its DC scans, so its AC scans are skipped, not Huffman-decoded. The pixels are those of
/// libjpeg's full decode at 1/8 (what libvips' jpegload makes with shrink=8). Tagged with
/// `orientation`, the file's ICC profile and the resolution `xres` x `yres` (pixels per mm,
/// vs_header's: what the thumbnail keeps and the saver writes). The descriptor is read with
/// pread, not closed.
/// Returns 0, or -2 when the file is not for this path (baseline, CMYK, nothing to skip) or
/// on any error, warning or cancel, with nothing in libvips' error buffer: the caller then
/// renders the file the usual way.
int vs_jpeg_dc_load_fd(int fd, int orientation, double xres, double yres, vs_cancel *cancel, VipsImage **out);

/// The 8-bit RGBA image open on `fd` (a loader without shrink-on-load) shrunk by `k` on
/// each side, in memory: each k x k block's mean with colours weighted by alpha (exact
/// integer sums, the premultiplied box filter libvips' own shrink applies, without its
/// full-size float premultiply). Tagged with the source's orientation and ICC profile, to
/// be finished by vs_thumbnail_image. Both sides must be multiples of k. Returns 0, or -1
/// with libvips' error set (also when the image is not 8-bit RGBA, or on cancel).
/// `fail_on_truncated` as for vs_thumbnail_fd.
int vs_alpha_shrink_fd(int fd, int k, int fail_on_truncated, vs_cancel *cancel, VipsImage **out);

/// An 8-bit sRGB image of `bands` bands over `pixels` (`stride` bytes a row), tagged with EXIF
/// `orientation`: a video's poster frame. Takes `pixels` (malloc'd), which it frees with free()
/// when the image closes, also when it fails. Returns 0, or -1 with libvips' error set.
int vs_image_from_pixels(uint8_t *pixels, int width, int height, int bands, size_t stride, int orientation,
                         VipsImage **out);

/// The size vs_thumbnail_fd makes for the same arguments, with no pixel decoded, for a source
/// of EXIF `orientation` (1-8).
int vs_plan_fd(int fd, int width, int height, int crop, int size, int page, int orientation, int *out_width,
               int *out_height);

/// The size vs_plan_fd gives for a JPEG of image_width x image_height (its header's sides,
/// unturned), without reading the file: libvips' shrink-on-load choice for JPEG, then the plan
/// of the image it loads (a thumbnail of a lazy blank of that size).
int vs_plan_jpeg(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                 int *out_width, int *out_height);
/// The size vs_thumbnail_image makes for the same box of a width x height image of EXIF
/// `orientation` (a video's frame, before it is decoded), with no pixel computed.
int vs_plan_size(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                 int *out_width, int *out_height);

/// The size, unturned, that vs_thumbnail_image resizes a width x height image of EXIF
/// `orientation` to before it crops (for `fit`, its output): a video's frame is converted
/// straight to it, so libvips only crops and turns it, and the output is the size planned.
int vs_resize_size(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                   int *out_width, int *out_height);

/// Pixels another decoder made (LibRaw's development or bitmap preview: packed rows, 1 or 3
/// bands, 8 or 16 bits native-endian), copied into an image tagged with EXIF `orientation`,
/// to be finished by vs_thumbnail_image like any photo. Returns 0, or -1 with libvips' error.
int vs_image_copy_pixels(const void *pixels, size_t length, int width, int height, int bands, int bits,
                         int orientation, VipsImage **out);
/// A JPEG in memory (a RAW's embedded preview) decoded into memory at 1/`shrink` (1, 2, 4 or
/// 8), tagged with `orientation` in place of any its own EXIF says (the RAW's turn is the
/// photo's). Returns 0, or -1 with libvips' error.
int vs_jpeg_from_buffer(const void *buf, size_t len, int shrink, int orientation, VipsImage **out);
/// Where a degraded preview comes from (vs_preview_fd's `kind`).
enum {
    VS_PREVIEW_EXIF = 1,  // the JPEG's EXIF thumbnail (IFD1), cut to the image's proportions
    VS_PREVIEW_HEIF = 2,  // the HEIF's thumbnail item (without one: the primary image, lazily)
};

/// A cheap degraded preview of the source, upright (turned by its EXIF orientation).
/// Returns -2 when the source has none of that kind; the image is lazy except the EXIF
/// thumbnail (decoded into memory: a few KiB).
int vs_preview_fd(int fd, int kind, vs_cancel *cancel, VipsImage **out);

/// A stored rendition (JPEG, PNG or WebP in memory), lazily, from a copy of `buf`.
int vs_load_rendition(const void *buf, size_t len, VipsImage **out);

/// Brings an image to exactly width x height with a cheap kernel (for previews, which must
/// be their final rendition's size): `fill` covers the box and keeps its centre, else the
/// sides are scaled each to its length.
int vs_fit_exact(VipsImage *in, int width, int height, int fill, VipsImage **out);

/// A placeholder's pixels (placeholder.c): `in` shrunk to fit `max_side` (never enlarged),
/// turned by its orientation, 8-bit sRGB (through its profile unless `profile_is_srgb`, as
/// vs_save_buffer), with alpha (255 when it has none): *width x *height RGBA pixels, packed
/// rows, in *pixels (free with vs_free). `in` should be small already (an embedded
/// thumbnail, a rendition): it is computed whole. Returns 0, or -1 with libvips' error.
int vs_placeholder_pixels(VipsImage *in, int max_side, int profile_is_srgb, void **pixels, int *width, int *height);

/// Error attribution gate. libvips' error buffer is global to the process: renders hold the
/// gate shared; to learn the exact message of a failure, the failing render is repeated
/// holding it exclusively (no other render runs, so the buffer holds only its messages).
void vs_gate_shared_begin(void);
void vs_gate_shared_end(void);
void vs_gate_exclusive_begin(void);
void vs_gate_exclusive_end(void);

/// One render's cancel request (opaque). Create one per render, pass it to vs_save_buffer,
/// request from any thread: the next evaluation step of that render's pipeline kills it and
/// vs_save_buffer fails. Other renders in the process are not touched.
vs_cancel *vs_cancel_new(void);
void vs_cancel_free(vs_cancel *cancel);
void vs_cancel_request(vs_cancel *cancel);
int vs_cancel_requested(const vs_cancel *cancel);

/// The `width` x `height` rectangle at `left`, `top` of an image, lazily (a region or a tile).
int vs_crop(VipsImage *in, int left, int top, int width, int height, VipsImage **out);

/// `bottom` below `top` (of one width), lazily: a level's strip and its neighbours' rows.
int vs_join_vertical(VipsImage *top, VipsImage *bottom, VipsImage **out);

/// Receives one band of vs_sink_bands (8-bit sRGB pixels in memory, `top` its first row);
/// returns 0 to go on, anything else to stop the computation. The band is the callee's to unref.
typedef int (*vs_band_fn)(void *context, VipsImage *band, int top);

/// Computes an image as 8-bit sRGB once, top to bottom (libvips' sink: each row decoded once,
/// as vips dzsave does), handing it to `fn` in bands of `band_height` rows (the last may be
/// shorter), in order, from libvips' write thread. `cancel` (may be NULL) stops it. Returns 0,
/// or -1 when the computation failed or `fn` stopped it.
int vs_sink_bands(VipsImage *in, int band_height, vs_cancel *cancel, vs_band_fn fn, void *context);

/// Dimensions of a (lazy) image.
void vs_image_size(VipsImage *image, int *width, int *height, int *bands);

/// The ICC profile an image is tagged with: 1 with its bytes (the image's: valid while it
/// lives), 0 when it has none.
int vs_image_icc(VipsImage *image, const void **data, size_t *length);

/// Encodes: flattens alpha onto `background` (0xRRGGBB) when the format has no alpha,
/// converts pixels still tagged with a profile to sRGB through it unless `profile_is_srgb`
/// (the caller's reading of vs_image_icc's bytes), and writes no metadata in any
/// format (every field the source's loader attached is removed first: EXIF, GPS, XMP, IPTC,
/// ICC). RAW writes 8-bit sRGB RGBA pixels, tightly packed.
/// On success *buf is g_malloc'd: free it with vs_free.
/// `cancel` may be NULL (not cancellable).
/// `fast`: a tile of a level, cut by the hundred: JPEG's Huffman tables are not optimized
/// (8 % larger, 40 % less time a tile).
/// `transform` (may be NULL: none) is applied first: turned, then flattened (a format without
/// alpha: the corners an angle opens take `background`), then recoloured, so that a bitonal
/// JPEG is black and white to its edges. Gray and bitonal are saved with one band (and
/// alpha, when the format keeps it); RAW always writes four.
int vs_save_buffer(VipsImage *image, int format, int quality, uint32_t background, int fast, int profile_is_srgb,
                   const vs_transform *transform, vs_cancel *cancel, void **buf, size_t *len, int *out_width,
                   int *out_height);


/// An HDR still (PQ or HLG: H.273 `transfer` 16 or 18, `primaries`, `peak_nits` 0 when
/// unknown; an HEIF's nclx box says them, libvips 8.14 does not read it), tone mapped to
/// 8-bit sRGB (CToneMap) at the size vs_thumbnail_image resizes it to for the box, tagged with
/// its orientation: the caller finishes it with vs_thumbnail_image. Loaded at 16 bits
/// (`page`, `fail_on_truncated` as vs_thumbnail_fd takes them) and resized before the tone
/// mapping. 0, or -1 with the libvips error set (hdr_still.c).
int vs_hdr_still_fd(int fd, int transfer, int primaries, int peak_nits, int width, int height, int crop, int size,
                    int page, int fail_on_truncated, vs_cancel *cancel, VipsImage **out);

#endif
