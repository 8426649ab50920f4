// A placeholder's pixels (issue 32): a small picture shrunk to fit a box, upright, 8-bit sRGB
// RGBA in memory, for the ThumbHash encoder (vs_placeholder_pixels).
#include "shim_private.h"

int vs_placeholder_pixels(VipsImage *in, int max_side, int profile_is_srgb, void **pixels, int *width, int *height) {
    *pixels = NULL;
    *width = *height = 0;
    // Turned by its orientation; never up: a 1x1 picture stays 1x1. No export profile: libvips
    // would take an untagged picture through its own sRGB profiles and shift its colours
    // (40 of red became 59); a profile other than sRGB is applied after, as the saver does.
    VipsImage *small = NULL;
    if (vs_thumbnail_image(in, max_side, max_side, 0, 2 /* VIPS_SIZE_DOWN */, 0, &small)) return -1;
    VipsImage *converted = NULL;
    if (vips_image_get_typeof(small, VIPS_META_ICC_NAME) && !profile_is_srgb
        && vips_icc_transform(small, &converted, "srgb", "embedded", TRUE, NULL))
        vips_error_clear();  // a damaged profile: the pixels as they are, as a render does
    VipsImage *srgb = NULL;
    int r = shim_to_srgb8(converted ? converted : small, &srgb);
    if (converted) g_object_unref(converted);
    g_object_unref(small);
    if (r) return -1;
    VipsImage *rgba = NULL;
    if (vips_image_hasalpha(srgb)) {
        rgba = srgb;
    } else {
        r = vips_bandjoin_const1(srgb, &rgba, 255.0, NULL);
        g_object_unref(srgb);
        if (r) return -1;
    }
    int w = vips_image_get_width(rgba), h = vips_image_get_height(rgba);
    if (vips_image_get_bands(rgba) != 4 || w > max_side || h > max_side) {
        vips_error("viewerd", "a placeholder of %dx%d in %d bands, not RGBA within %d", w, h,
                   vips_image_get_bands(rgba), max_side);
        g_object_unref(rgba);
        return -1;
    }
    size_t size = 0;
    void *data = vips_image_write_to_memory(rgba, &size);
    g_object_unref(rgba);
    if (!data) return -1;
    *pixels = data;
    *width = w;
    *height = h;
    return 0;
}
