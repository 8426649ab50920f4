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

int vs_fixture_jpegsave(const uint8_t *pixels, int width, int height, int bands, int quality, int optimize_coding,
                        uint32_t background, void **buf, size_t *len) {
    *buf = NULL;
    VipsImage *mem = vips_image_new_from_memory_copy(pixels, (size_t)width * height * bands, width, height, bands,
                                                     VIPS_FORMAT_UCHAR);
    if (!mem) return -1;
    VipsImage *img = NULL;
    int r = vips_copy(mem, &img, "interpretation", bands < 3 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB, NULL);
    g_object_unref(mem);
    if (r) return -1;
    if (bands == 2 || bands == 4) {
        double rgb[3] = {(background >> 16) & 0xff, (background >> 8) & 0xff, background & 0xff};
        VipsArrayDouble *bg = vips_array_double_new(rgb, bands == 4 ? 3 : 1);
        VipsImage *flat = NULL;
        r = vips_flatten(img, &flat, "background", bg, NULL);
        vips_area_unref(VIPS_AREA(bg));
        g_object_unref(img);
        if (r) return -1;
        img = flat;
    }
    r = vips_jpegsave_buffer(img, buf, len, "Q", quality, "optimize_coding", optimize_coding, "interlace", FALSE,
                             "strip", TRUE, NULL);
    g_object_unref(img);
    return r;
}

// The thread that made the recording image, and how many strips another thread computed.
static GThread *recording_creator;
static gint generated_elsewhere;

static int recording_generate(VipsRegion *out, void *seq, void *a, void *b, gboolean *stop) {
    (void)seq, (void)a, (void)b, (void)stop;
    if (g_thread_self() != recording_creator) g_atomic_int_inc(&generated_elsewhere);
    VipsRect *r = &out->valid;
    for (int y = r->top; y < VIPS_RECT_BOTTOM(r); y++) {
        VipsPel *p = VIPS_REGION_ADDR(out, r->left, y);
        for (int x = r->left; x < VIPS_RECT_RIGHT(r); x++, p += 3) p[0] = (VipsPel)x, p[1] = (VipsPel)y, p[2] = (VipsPel)(x ^ y);
    }
    return 0;
}

int vs_fixture_recording_image(int width, int height, VipsImage **out) {
    recording_creator = g_thread_self();
    g_atomic_int_set(&generated_elsewhere, 0);
    VipsImage *image = vips_image_new();
    vips_image_init_fields(image, width, height, 3, VIPS_FORMAT_UCHAR, VIPS_CODING_NONE, VIPS_INTERPRETATION_sRGB, 1, 1);
    if (vips_image_pipelinev(image, VIPS_DEMAND_STYLE_FATSTRIP, NULL) ||
        vips_image_generate(image, NULL, recording_generate, NULL, NULL, NULL)) {
        g_object_unref(image);
        return -1;
    }
    *out = image;
    return 0;
}

int vs_fixture_strips_generated_elsewhere(void) { return g_atomic_int_get(&generated_elsewhere); }
