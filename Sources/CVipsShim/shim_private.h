// What CVipsShim's files share and Swift does not see (include/vips_shim.h is the public API).
// One file per concern: shim.c (start, errors, cancel, gate), source.c (the descriptor's
// source), header.c, thumbnail.c (thumbnails, plans, fits, crops, joins), preview.c,
// alpha_shrink.c, tiles.c (sink_bands), save.c (encode, load a rendition, the tests' writer),
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

#endif
