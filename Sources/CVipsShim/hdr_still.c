// HDR stills (issue 31): a PQ or HLG HEIF/AVIF, which libvips 8.14 loads as 16-bit RGB and
// would show as if it were sRGB, is resized at 16 bits, tone mapped to 8-bit sRGB by CToneMap
// (the same pixels a video's poster gets), and handed back for vs_thumbnail_image to crop,
// turn and encode (docs/RENDERING.md, "HDR sources").
#include <stdio.h>

#include <vips/vips.h>

#include "shim_private.h"
#include "tonemap.h"
#include "vips_shim.h"

int vs_hdr_still_fd(int fd, int transfer, int primaries, int peak_nits, int width, int height, int crop, int size,
                    int page, int fail_on_truncated, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    if (!tm_is_hdr_transfer(transfer)) {
        vips_error("viewerd", "transfer %d is not an HDR one", transfer);
        return -1;
    }
    VipsSource *source = shim_source_for_fd(fd, cancel);
    if (!source) return -1;
    char options[48] = "";
    snprintf(options, sizeof options, "page=%d%s", page, fail_on_truncated ? ",fail_on=truncated" : "");
    VipsImage *loaded = vips_image_new_from_source(source, options, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    g_object_unref(source);
    if (!loaded) return -1;
    int orientation = vips_image_get_orientation(loaded);
    int bands = vips_image_get_bands(loaded);
    if (bands != 3 && bands != 4) {
        g_object_unref(loaded);
        vips_error("viewerd", "an HDR image of %d bands", bands);
        return -1;
    }
    // At the size vs_thumbnail_image resizes to, so that it only crops and turns (a video
    // frame's path): the resize is in the signal's own domain, as an SDR photo's is in sRGB's.
    int w = loaded->Xsize, h = loaded->Ysize;
    int target_w = w, target_h = h;
    if (vs_resize_size(w, h, width, height, crop, size, orientation, &target_w, &target_h) != 0 || target_w < 1 || target_h < 1) {
        vips_error_clear();
        target_w = w, target_h = h;
    }
    VipsImage *wide = NULL;
    // Eight-bit HDR (rare) is widened so the tone mapping sees one format.
    int failed = loaded->BandFmt == VIPS_FORMAT_USHORT ? (g_object_ref(loaded), wide = loaded, 0)
                 : vips_cast_ushort(loaded, &wide, "shift", TRUE, NULL);
    g_object_unref(loaded);
    if (failed) return -1;
    VipsImage *resized = NULL;
    if (target_w != w || target_h != h) {
        failed = vips_resize(wide, &resized, (double)target_w / w, "vscale", (double)target_h / h, NULL);
        g_object_unref(wide);
        if (failed) return -1;
    } else {
        resized = wide;
    }
    size_t length = 0;
    uint16_t *signal = vips_image_write_to_memory(resized, &length);
    int out_w = resized->Xsize, out_h = resized->Ysize;
    g_object_unref(resized);
    if (!signal) return -1;
    size_t stride = (size_t)out_w * bands;
    uint8_t *pixels = g_try_malloc(stride * (size_t)out_h);
    if (!pixels) {
        g_free(signal);
        vips_error("viewerd", "out of memory for a %dx%d image", out_w, out_h);
        return -1;
    }
    tm_to_srgb8(transfer, primaries, peak_nits, signal, stride, pixels, stride, out_w, out_h, bands);
    g_free(signal);
    VipsImage *image = vips_image_new_from_memory(pixels, stride * (size_t)out_h, out_w, out_h, bands, VIPS_FORMAT_UCHAR);
    if (!image) {
        g_free(pixels);
        return -1;
    }
    g_object_set_data_full(G_OBJECT(image), "viewerd-pixels", pixels, g_free);
    image->Type = VIPS_INTERPRETATION_sRGB;
    vips_image_set_int(image, VIPS_META_ORIENTATION, orientation);
    *out = image;
    return 0;
}
