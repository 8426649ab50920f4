// Thumbnails (shrink-on-load from a source, from memory, of an image), their size planned
// without decoding, an exact fit for previews, and the crops and joins of regions and levels.
#include "shim_private.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The crop anchors of vips_shim.h, as libvips names them.
static VipsInteresting interesting_of(int crop) {
    static const VipsInteresting crops[] = {
        VIPS_INTERESTING_NONE, VIPS_INTERESTING_CENTRE, VIPS_INTERESTING_ATTENTION,
        VIPS_INTERESTING_ENTROPY,
    };
    return (crop >= 0 && crop <= 3) ? crops[crop] : VIPS_INTERESTING_NONE;
}

static int thumbnail_common(VipsSource *source, const void *buf, size_t len, int width, int height,
                            int crop, int size, int page, int to_srgb, int no_rotate, int fail_on_truncated,
                            VipsImage **out) {
    VipsInteresting interesting = interesting_of(crop);
    // A source cut short (a photo still being copied) fails instead of decoding grey past the
    // cut. Through the loader's options: 8.14's thumbnail does not pass its own fail_on to a
    // source's loader.
    char options[48] = "";
    if (page > 0) snprintf(options, sizeof(options), "page=%d", page);  // not every loader has pages
    if (fail_on_truncated) g_strlcat(options, page > 0 ? ",fail_on=truncated" : "fail_on=truncated", sizeof(options));
    // Without an export profile 8.14 keeps the embedded profile's colour space; we strip
    // profiles from outputs, so convert to sRGB here. NULL when there is nothing to convert.
    const char *export_profile = to_srgb ? "srgb" : NULL;
    if (source)
        return vips_thumbnail_source(source, out, width, "height", height, "crop", interesting,
                                     "size", (VipsSize)size, "option_string", options,
                                     "export_profile", export_profile, "no_rotate", no_rotate, NULL);
    return vips_thumbnail_buffer((void *)buf, len, out, width, "height", height, "crop", interesting,
                                 "size", (VipsSize)size, "option_string", options,
                                 "export_profile", export_profile, "no_rotate", no_rotate, NULL);
}

int vs_thumbnail_fd(int fd, int width, int height, int crop, int size, int page, int to_srgb,
                    int fail_on_truncated, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    VipsSource *source = shim_source_for_fd(fd, cancel);
    if (!source) return -1;
    int result = thumbnail_common(source, NULL, 0, width, height, crop, size, page, to_srgb, FALSE, fail_on_truncated,
                                  out);
    g_object_unref(source);
    return result;
}

int vs_thumbnail_image(VipsImage *in, int width, int height, int crop, int size, int to_srgb, VipsImage **out) {
    *out = NULL;
    return vips_thumbnail_image(in, out, width, "height", height, "crop", interesting_of(crop),
                                "size", (VipsSize)size, "export_profile", to_srgb ? "srgb" : NULL, NULL);
}

int vs_image_from_pixels(uint8_t *pixels, int width, int height, int bands, size_t stride, int orientation,
                         VipsImage **out) {
    *out = NULL;
    size_t line = (size_t)width * bands;
    if (width < 1 || height < 1 || bands < 1 || stride < line) {
        free(pixels);
        vips_error("viewerd", "a %dx%d image of %d bands cannot have rows of %zu bytes", width, height, bands, stride);
        return -1;
    }
    // libvips' memory images have packed rows.
    if (stride != line) {
        for (int y = 1; y < height; y++) memmove(pixels + line * y, pixels + stride * y, line);
    }
    VipsImage *image = vips_image_new_from_memory(pixels, line * (size_t)height, width, height, bands, VIPS_FORMAT_UCHAR);
    if (!image) {
        free(pixels);
        return -1;
    }
    // The pixels live as long as the image.
    g_object_set_data_full(G_OBJECT(image), "viewerd-pixels", pixels, free);
    image->Type = bands < 3 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
    vips_image_set_int(image, VIPS_META_ORIENTATION, orientation);
    *out = image;
    return 0;
}

int vs_plan_fd(int fd, int width, int height, int crop, int size, int page, int orientation, int *out_width,
               int *out_height) {
    VipsSource *source = shim_source_for_fd(fd, NULL);
    if (!source) return -1;
    // libvips turns a sequentially read image by copying it to memory while the pipeline is
    // built: asking a rotated photo's size that way decoded it whole. Unturned, with the box
    // turned as libvips turns it for orientations 5-8, the plan is the same and lazy.
    int swap = orientation >= 5 && orientation <= 8;
    VipsImage *planned = NULL;
    int result = thumbnail_common(source, NULL, 0, swap ? height : width, swap ? width : height, crop, size, page,
                                  FALSE, TRUE, FALSE, &planned);
    g_object_unref(source);
    if (result) return result;
    int w = vips_image_get_width(planned), h = vips_image_get_height(planned);
    g_object_unref(planned);
    *out_width = swap ? h : w;
    *out_height = swap ? w : h;
    return 0;
}

// The size vips_thumbnail_image makes of a lazy black image_width x image_height image for
// an unturned box (nothing is computed). Float sRGB pixels: the sizes are those of 8-bit ones,
// and libvips compiles no vector code for resampling them (an 8-bit plan spent half its time
// compiling Orc programs for a reducev that never runs).
static int plan_blank(int image_width, int image_height, int box_width, int box_height, int crop, int size, int *out_width,
                      int *out_height) {
    VipsImage *black = NULL, *cast = NULL, *blank = NULL, *planned = NULL;
    if (vips_black(&black, image_width, image_height, "bands", 3, NULL)) return -1;
    int result = vips_cast_float(black, &cast, NULL);
    g_object_unref(black);
    if (result) return result;
    result = vips_copy(cast, &blank, "interpretation", VIPS_INTERPRETATION_sRGB, NULL);
    g_object_unref(cast);
    if (result) return result;
    result = vips_thumbnail_image(blank, &planned, box_width, "height", box_height, "crop", interesting_of(crop),
                                  "size", (VipsSize)size, NULL);
    g_object_unref(blank);
    if (result) return result;
    *out_width = vips_image_get_width(planned);
    *out_height = vips_image_get_height(planned);
    g_object_unref(planned);
    return 0;
}

int vs_plan_size(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                 int *out_width, int *out_height) {
    // Unturned, with the box turned, as vs_plan_fd does.
    int swap = orientation >= 5 && orientation <= 8;
    int w, h;
    int result = plan_blank(image_width, image_height, swap ? height : width, swap ? width : height, crop, size, &w, &h);
    if (result) return result;
    *out_width = swap ? h : w;
    *out_height = swap ? w : h;
    return 0;
}

// libvips 8.14's choice of a JPEG's shrink-on-load in vips_thumbnail (thumbnail.c:
// vips_thumbnail_calculate_shrink, vips_thumbnail_find_jpegshrink) for an unturned box, not
// linear: the common shrink of both axes, then 8, 4 or 2 while leaving at least 2 to resize.
static int jpeg_load_shrink(int width, int height, int box_width, int box_height, int crop, int size) {
    double hshrink = (double)width / box_width, vshrink = (double)height / box_height;
    // Fill binds the smaller shrink, fit the larger; FORCE keeps both.
    int horizontal = crop != VS_CROP_NONE ? hshrink < vshrink : !(hshrink < vshrink);
    if (size != VIPS_SIZE_FORCE) {
        if (horizontal) vshrink = hshrink;
        else hshrink = vshrink;
    }
    if (size == VIPS_SIZE_UP) {
        hshrink = VIPS_MIN(1, hshrink);
        vshrink = VIPS_MIN(1, vshrink);
    } else if (size == VIPS_SIZE_DOWN) {
        hshrink = VIPS_MAX(1, hshrink);
        vshrink = VIPS_MAX(1, vshrink);
    }
    hshrink = VIPS_MIN(hshrink, width);
    vshrink = VIPS_MIN(vshrink, height);
    double shrink = VIPS_MIN(hshrink, vshrink);
    return shrink >= 16 ? 8 : shrink >= 8 ? 4 : shrink >= 4 ? 2 : 1;
}

int vs_plan_jpeg(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                 int *out_width, int *out_height) {
    if (image_width < 1 || image_height < 1 || width < 1 || height < 1) {
        vips_error("viewerd", "no plan for a %dx%d JPEG into %dx%d", image_width, image_height, width, height);
        return -1;
    }
    int swap = orientation >= 5 && orientation <= 8;
    int box_width = swap ? height : width, box_height = swap ? width : height;
    // 8.14's jpegload crops libjpeg's scaled image (whose sides round up) to the floor of
    // the shrink: 1001 at shrink 2 loads as 500.
    int k = jpeg_load_shrink(image_width, image_height, box_width, box_height, crop, size);
    int w, h;
    int result = plan_blank(VIPS_MAX(image_width / k, 1), VIPS_MAX(image_height / k, 1), box_width, box_height, crop, size,
                            &w, &h);
    if (result) return result;
    *out_width = swap ? h : w;
    *out_height = swap ? w : h;
    return 0;
}

int vs_resize_size(int image_width, int image_height, int width, int height, int crop, int size, int orientation,
                   int *out_width, int *out_height) {
    int swap = orientation >= 5 && orientation <= 8;
    int box_width = swap ? height : width, box_height = swap ? width : height;
    if (crop != VS_CROP_NONE) {
        // Fill: the side whose ratio is the larger binds, the other is cropped afterwards.
        double horizontal = (double)box_width / image_width, vertical = (double)box_height / image_height;
        if (horizontal >= vertical) box_height = 10000000;
        else box_width = 10000000;
    }
    return plan_blank(image_width, image_height, box_width, box_height, VS_CROP_NONE, size, out_width, out_height);
}

int vs_thumbnail_buffer(const void *buf, size_t len, int width, int height, int crop, int size,
                        int page, int to_srgb, VipsImage **out) {
    *out = NULL;
    return thumbnail_common(NULL, buf, len, width, height, crop, size, page, to_srgb, FALSE, FALSE, out);
}

// Resizes to exactly width x height (a rounding pixel is made up by repeating the edge).
static int resize_exact(VipsImage *in, int width, int height, VipsImage **out) {
    int w = vips_image_get_width(in), h = vips_image_get_height(in);
    VipsImage *t = NULL;
    if (w == width && h == height) {
        g_object_ref(in);
        t = in;
    } else if (vips_resize(in, &t, (double)width / w, "vscale", (double)height / h, "kernel", VIPS_KERNEL_LINEAR, NULL)) {
        return -1;
    }
    if (vips_image_get_width(t) == width && vips_image_get_height(t) == height) {
        *out = t;
        return 0;
    }
    int r = vips_gravity(t, out, VIPS_COMPASS_DIRECTION_CENTRE, width, height, "extend", VIPS_EXTEND_COPY, NULL);
    g_object_unref(t);
    return r;
}

int vs_fit_exact(VipsImage *in, int width, int height, int fill, VipsImage **out) {
    if (!fill) return resize_exact(in, width, height, out);
    // fill: cover the box keeping the ratio, then the centre of it.
    int w = vips_image_get_width(in), h = vips_image_get_height(in);
    double sx = (double)width / w, sy = (double)height / h;
    double scale = sx > sy ? sx : sy;
    int cw = (int)(width / scale + 0.5), ch = (int)(height / scale + 0.5);
    if (cw > w) cw = w;
    if (ch > h) ch = h;
    if (cw < 1) cw = 1;
    if (ch < 1) ch = 1;
    VipsImage *cropped = NULL;
    if (vips_extract_area(in, &cropped, (w - cw) / 2, (h - ch) / 2, cw, ch, NULL)) return -1;
    int r = resize_exact(cropped, width, height, out);
    g_object_unref(cropped);
    return r;
}

int vs_crop(VipsImage *in, int left, int top, int width, int height, VipsImage **out) {
    *out = NULL;
    return vips_extract_area(in, out, left, top, width, height, NULL);
}

int vs_join_vertical(VipsImage *top, VipsImage *bottom, VipsImage **out) {
    *out = NULL;
    return vips_join(top, bottom, out, VIPS_DIRECTION_VERTICAL, NULL);
}

int vs_image_copy_pixels(const void *pixels, size_t length, int width, int height, int bands, int bits,
                         int orientation, VipsImage **out) {
    *out = NULL;
    if ((bands != 1 && bands != 3) || (bits != 8 && bits != 16) ||
        length < (size_t)width * height * bands * (bits / 8)) {
        vips_error("viewerd", "%s", "pixels of an unexpected layout");
        return -1;
    }
    VipsImage *image = vips_image_new_from_memory_copy(pixels, length, width, height, bands,
                                                       bits == 16 ? VIPS_FORMAT_USHORT : VIPS_FORMAT_UCHAR);
    if (!image) return -1;
    VipsInterpretation interpretation = bands == 1 ? (bits == 16 ? VIPS_INTERPRETATION_GREY16 : VIPS_INTERPRETATION_B_W)
                                                   : (bits == 16 ? VIPS_INTERPRETATION_RGB16 : VIPS_INTERPRETATION_sRGB);
    image->Type = interpretation;
    vips_image_set_int(image, VIPS_META_ORIENTATION, orientation);
    *out = image;
    return 0;
}
