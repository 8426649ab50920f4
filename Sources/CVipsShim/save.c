// Encoding renditions (their pixels stripped of every field, WebP's metadata chunks cut),
// loading stored ones, and the tests' pixel writer and decoder.
#include "shim_private.h"

#include <stdio.h>
#include <string.h>

// Converts to 8-bit sRGB (keeping alpha), taking a new reference in *out.
int shim_to_srgb8(VipsImage *in, VipsImage **out) {
    VipsImage *t = NULL;
    if (vips_colourspace(in, &t, VIPS_INTERPRETATION_sRGB, NULL)) return -1;
    if (vips_image_get_format(t) != VIPS_FORMAT_UCHAR) {
        VipsImage *c = NULL;
        int r = vips_cast_uchar(t, &c, NULL);
        g_object_unref(t);
        if (r) return -1;
        t = c;
    }
    *out = t;
    return 0;
}

// The pixels a rendition is encoded from, and nothing else: 8-bit sRGB, with every field a
// loader attached to the source removed (EXIF and its exif-ifd* copies, XMP, IPTC, maker
// notes, a PNG's text, a HEIF thumbnail item's copy of its primary's EXIF, the page and
// orientation fields). A rendition is shared between users and served to any client of the
// file, so it must not carry a GPS position or a name, and it must not depend on each saver's
// `strip` for that: 8.14.1's webpsave ignores it (and see webp_without_metadata). Pixels that
// reach here still tagged with a profile other than sRGB (a HEIF thumbnail item keeps its
// file's Display P3; `profile_is_srgb` is the caller's word on that) are converted through it first, so that nothing the pixels need is lost;
// a profile that cannot be used (damaged) leaves them as they are, as a render without one.
static int rendition_pixels(VipsImage *in, int profile_is_srgb, VipsImage **out) {
    VipsImage *converted = NULL;
    if (vips_image_get_typeof(in, VIPS_META_ICC_NAME) && !profile_is_srgb
        && vips_icc_transform(in, &converted, "srgb", "embedded", TRUE, NULL))
        vips_error_clear();
    VipsImage *srgb = NULL, *copy = NULL;
    int r = shim_to_srgb8(converted ? converted : in, &srgb);
    if (converted) g_object_unref(converted);
    if (r) return -1;
    r = vips_copy(srgb, &copy, NULL);
    g_object_unref(srgb);
    if (r) return -1;
    // The copy's own fields: removing them leaves the image it was made from as it was. The
    // header fields (width, bands, resolution, ...) are not among those vips_image_remove finds.
    gchar **fields = vips_image_get_fields(copy);
    for (gchar **field = fields; field && *field; field++) vips_image_remove(copy, *field);
    g_strfreev(fields);
    *out = copy;
    return 0;
}

static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static void put_le32(uint8_t *p, uint32_t v) {
    for (int k = 0; k < 4; k++) p[k] = (uint8_t)(v >> (8 * k));
}

// libvips 8.14.1's webpsave writes an EXIF chunk whatever `strip` says and whatever the image
// carries (one it rebuilds from the header: resolution, orientation), so its WebP is cut here:
// the EXIF, XMP and ICCP chunks are removed and VP8X's flags for them cleared, in place (the
// file only shrinks). A WebP that does not parse as RIFF chunks is an error, not a rendition
// sent unchecked.
static int webp_without_metadata(uint8_t *webp, size_t *len) {
    size_t n = *len;
    if (n < 12 || memcmp(webp, "RIFF", 4) != 0 || memcmp(webp + 8, "WEBP", 4) != 0 || le32(webp + 4) != n - 8) {
        vips_error("viewerd", "webpsave wrote no RIFF WebP (%zu bytes)", n);
        return -1;
    }
    size_t read = 12, write = 12, vp8x = 0;
    while (read < n) {
        if (n - read < 8) break;
        uint32_t size = le32(webp + read + 4);
        size_t chunk = 8 + (size_t)size + (size & 1);
        if (chunk > n - read) break;
        int metadata = !memcmp(webp + read, "EXIF", 4) || !memcmp(webp + read, "XMP ", 4) || !memcmp(webp + read, "ICCP", 4);
        if (!metadata) {
            if (!memcmp(webp + read, "VP8X", 4) && size >= 1) vp8x = write;
            memmove(webp + write, webp + read, chunk);
            write += chunk;
        }
        read += chunk;
    }
    if (read != n) {
        vips_error("viewerd", "webpsave wrote a WebP whose chunks do not add up (%zu bytes)", n);
        return -1;
    }
    if (vp8x) webp[vp8x + 8] &= (uint8_t)~(0x20 | 0x08 | 0x04);  // ICC, EXIF, XMP flags
    put_le32(webp + 4, (uint32_t)(write - 8));
    *len = write;
    return 0;
}

int vs_save_buffer(VipsImage *image, int format, int quality, uint32_t background, int fast, int profile_is_srgb,
                   const vs_transform *transform, vs_cancel *cancel, void **buf, size_t *len, int *out_width,
                   int *out_height) {
    *buf = NULL;
    *len = 0;
    VipsImage *img = NULL;
    if (rendition_pixels(image, profile_is_srgb, &img)) return -1;
    if (transform && shim_turn(&img, transform)) {
        g_object_unref(img);
        return -1;
    }
    if (cancel) {
        vips_image_set_progress(img, TRUE);
        g_signal_connect(img, "eval", G_CALLBACK(shim_on_eval), cancel);
    }
    int has_alpha = vips_image_hasalpha(img);
    if (has_alpha && format == VS_FORMAT_JPEG) {
        double rgb[3] = {(background >> 16) & 0xff, (background >> 8) & 0xff, background & 0xff};
        VipsArrayDouble *bg = vips_array_double_new(rgb, 3);
        VipsImage *flat = NULL;
        int r = vips_flatten(img, &flat, "background", bg, NULL);
        vips_area_unref(VIPS_AREA(bg));
        g_object_unref(img);
        if (r) return -1;
        img = flat;
    }
    // Recoloured after the flattening: a bitonal JPEG's rotated corners are black or white too.
    if (transform && shim_recolour(&img, transform->colour)) {
        g_object_unref(img);
        return -1;
    }
    // Gray or bitonal pixels are written as one band; RAW is RGBA whatever they are.
    if (format == VS_FORMAT_RAW && vips_image_get_bands(img) < 3) {
        VipsImage *rgb = NULL;
        int r = vips_colourspace(img, &rgb, VIPS_INTERPRETATION_sRGB, NULL);
        g_object_unref(img);
        if (r) return -1;
        img = rgb;
    }
    has_alpha = vips_image_hasalpha(img);
    int result = -1;
    switch (format) {
    case VS_FORMAT_JPEG:
        // On this thread, without libvips' thread pool and its wake-ups (direct_save.c).
        result = shim_save_jpeg_direct(img, quality, !fast, cancel, buf, len);
        if (result == 1)
            result = vips_jpegsave_buffer(img, buf, len, "Q", quality, "optimize_coding", !fast,
                                          "interlace", FALSE, "strip", TRUE, NULL);
        break;
    case VS_FORMAT_WEBP:
        result = vips_webpsave_buffer(img, buf, len, "Q", quality, "strip", TRUE, NULL);
        if (result == 0 && webp_without_metadata(*buf, len)) {
            g_free(*buf);
            *buf = NULL;
            *len = 0;
            result = -1;
        }
        break;
    case VS_FORMAT_PNG:
        result = vips_pngsave_buffer(img, buf, len, "compression", 6, "strip", TRUE, NULL);
        break;
    case VS_FORMAT_AVIF:
        result = vips_heifsave_buffer(img, buf, len, "Q", quality, "compression",
                                      VIPS_FOREIGN_HEIF_COMPRESSION_AV1, "effort", 2, "strip", TRUE,
                                      NULL);
        break;
    case VS_FORMAT_GIF:
        result = vips_gifsave_buffer(img, buf, len, "strip", TRUE, NULL);
        break;
    case VS_FORMAT_RAW: {
        VipsImage *rgba = NULL;
        if (has_alpha) {
            rgba = img;
            g_object_ref(rgba);
        } else if (vips_bandjoin_const1(img, &rgba, 255.0, NULL)) {
            break;
        }
        // On this thread, without libvips' thread pool (direct_save.c).
        result = shim_save_raw_direct(rgba, cancel, buf, len);
        g_object_unref(rgba);
        break;
    }
    default:
        vips_error("viewerd", "unknown output format %d", format);
    }
    if (result == 0) {
        *out_width = vips_image_get_width(img);
        *out_height = vips_image_get_height(img);
    }
    g_object_unref(img);
    return result;
}

int vs_load_rendition(const void *buf, size_t len, VipsImage **out) {
    *out = NULL;
    const char *loader = vips_foreign_find_load_buffer(buf, len);
    if (!loader || (strcmp(loader, "VipsForeignLoadJpegBuffer") && strcmp(loader, "VipsForeignLoadPngBuffer") &&
                    strcmp(loader, "VipsForeignLoadWebpBuffer"))) {
        vips_error("viewerd", "not a stored rendition's format");
        return -1;
    }
    // A copy the image owns: the caller's bytes may go before the image is computed.
    VipsBlob *blob = vips_blob_copy(buf, len);
    VipsSource *source = vips_source_new_from_blob(blob);
    vips_area_unref(VIPS_AREA(blob));
    if (!source) return -1;
    *out = vips_image_new_from_source(source, "access=sequential", NULL);
    g_object_unref(source);
    return *out ? 0 : -1;
}
