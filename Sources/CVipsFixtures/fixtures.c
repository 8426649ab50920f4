// The test fixtures' writer and decoder (include/vips_fixtures.h), apart from CVipsShim so that
// viewerd and its workers carry no code that writes a file by path.
#include "vips_fixtures.h"

#include <vips/vips.h>

int vs_write_pixels(const char *path, const uint8_t *pixels, int width, int height, int bands,
                    int orientation, int pages, const char *options) {
    VipsImage *mem = vips_image_new_from_memory_copy(pixels, (size_t)width * height * bands, width,
                                                     height, bands, VIPS_FORMAT_UCHAR);
    if (!mem) return -1;
    VipsImage *img = NULL;
    VipsInterpretation interpretation = bands < 3 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB;
    int r = vips_copy(mem, &img, "interpretation", interpretation, NULL);
    g_object_unref(mem);
    if (r) return -1;
    if (orientation > 1) vips_image_set_int(img, VIPS_META_ORIENTATION, orientation);
    if (pages > 1) {
        vips_image_set_int(img, VIPS_META_PAGE_HEIGHT, height / pages);
        vips_image_set_int(img, VIPS_META_N_PAGES, pages);
    }
    char target[4096];
    if (options && *options)
        snprintf(target, sizeof(target), "%s[%s]", path, options);
    else
        snprintf(target, sizeof(target), "%s", path);
    r = vips_image_write_to_file(img, target, NULL);
    g_object_unref(img);
    return r;
}

int vs_decode_buffer(const void *buf, size_t len, uint8_t **pixels, int *width, int *height,
                     int *bands) {
    *pixels = NULL;
    VipsImage *img = vips_image_new_from_buffer(buf, len, "", NULL);
    if (!img) return -1;
    VipsImage *u8 = img;
    if (vips_image_get_format(img) != VIPS_FORMAT_UCHAR) {
        if (vips_cast_uchar(img, &u8, NULL)) {
            g_object_unref(img);
            return -1;
        }
        g_object_unref(img);
    }
    size_t size = 0;
    *pixels = vips_image_write_to_memory(u8, &size);
    *width = vips_image_get_width(u8);
    *height = vips_image_get_height(u8);
    *bands = vips_image_get_bands(u8);
    g_object_unref(u8);
    return *pixels ? 0 : -1;
}
