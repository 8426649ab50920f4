// What CVipsShim's files share and Swift does not see (include/vips_shim.h is the public API).
// One file per concern: shim.c (start, errors, cancel, gate), source.c (the descriptor's
// source), header.c, thumbnail.c (thumbnails, plans, fits, crops, joins), preview.c,
// alpha_shrink.c, tiles.c (sink_bands), save.c (encode, load a rendition, the tests' writer),
// transform.c (mirror, rotation, gray and bitonal before the save),
// direct_save.c (JPEG and RAW computed and written on the calling thread),
// jpeg_partial.c (the DC-only progressive JPEG decode), placeholder.c (a ThumbHash's pixels).
#ifndef VIEWERD_SHIM_PRIVATE_H
#define VIEWERD_SHIM_PRIVATE_H

#include "vips_shim.h"

#include <vips/vips.h>

/// A source reading the file open on `fd` (a duplicate of it) from its start; reads fail once
/// `cancel` (may be NULL) is requested (source.c).
VipsSource *shim_source_for_fd(int fd, vs_cancel *cancel);

/// libvips' "eval" signal handler: kills the pipeline once the `vs_cancel` given as `user` is
/// requested (shim.c). Connect it with vips_image_set_progress on.
void shim_on_eval(VipsImage *image, VipsProgress *progress, void *user);

/// The image as 8-bit sRGB (alpha kept), a new reference in *out (save.c).
int shim_to_srgb8(VipsImage *in, VipsImage **out);

/// `in`, 8-bit sRGB or B_W without alpha, computed on this thread and encoded as libvips'
/// jpegsave_buffer would with Q `quality`, `optimize_coding`, strip and no interlace, byte for
/// byte (direct_save.c). Returns 0 with *buf g_malloc'd, -1 with libvips' error, or 1 when the
/// image is not one it writes (the caller uses libvips' saver).
int shim_save_jpeg_direct(VipsImage *in, int quality, int optimize_coding, vs_cancel *cancel, void **buf,
                          size_t *len);

/// Mirrors and turns *image as `transform` says (transform.c): 8-bit sRGB in, 8-bit sRGB out,
/// with alpha when an angle other than a quarter turn opened corners (transparent). *image is
/// replaced on success; on failure it is left as it was, with libvips' error set (-1).
int shim_turn(VipsImage **image, const vs_transform *transform);

/// Recolours *image (8-bit sRGB, alpha kept) as `colour` says: one band of gray, or of black
/// and white (transform.c). *image is replaced on success, left on failure (-1).
int shim_recolour(VipsImage **image, int colour);

/// `in`'s pixels, computed on this thread, packed rows in a g_malloc'd buffer (direct_save.c).
int shim_save_raw_direct(VipsImage *in, vs_cancel *cancel, void **buf, size_t *len);

#endif
