// Renditions computed and encoded on the calling thread: JPEG through libjpeg as libvips'
// jpegsave would write it, byte for byte, and RAW pixels (shim_save_jpeg_direct,
// shim_save_raw_direct).
//
// libvips' savers compute an image through its thread pool (vips_sink_disc): with one thread
// a render, a worker thread computes strips of 16 rows, wakes the calling thread after each
// (its "tick") and hands every 128 rows to a write thread, which encodes. For a thumbnail that
// is about 60 thread wake-ups, 120 futex calls and 1.5 ms of waiting on a loaded machine for
// 0.3 ms of work (issue 32: "about 3 ms in every libvips save"); vipsthumbnail pays the same.
// Here the calling thread asks for the same strips itself, top to bottom, and hands each to
// libjpeg at once: no thread, no wake-up.
#include "shim_private.h"

#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jpeglib.h>

// Asks for `in` in full-width strips through `region` (the caller's: `fn` may longjmp out of
// here, and the caller frees it on both paths), top to bottom, as libvips' sink does (the
// height it picks for the image), on this thread, and hands each to `fn`; stops at the first
// error, a cancel request between two strips included. Returns 0, or -1 with libvips' error.
typedef int (*strip_fn)(void *context, VipsRegion *region, int top, int height);

static int each_strip(VipsImage *in, VipsRegion *region, vs_cancel *cancel, strip_fn fn, void *context) {
    int tile_width, tile_height, n_lines;
    vips_get_tile_size(in, &tile_width, &tile_height, &n_lines);
    int result = 0;
    for (int top = 0; top < in->Ysize && result == 0; top += tile_height) {
        if (cancel && vs_cancel_requested(cancel)) {
            vips_error("viewerd", "%s", "cancelled");
            result = -1;
            break;
        }
        VipsRect strip = {0, top, in->Xsize, VIPS_MIN(tile_height, in->Ysize - top)};
        result = vips_region_prepare(region, &strip) || fn(context, region, top, strip.height) ? -1 : 0;
    }
    return result;
}

// What libjpeg's errors jump back to, and its message for libvips' error buffer.
typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} jpeg_error;

static void jpeg_error_exit(j_common_ptr cinfo) {
    char message[JMSG_LENGTH_MAX];
    cinfo->err->format_message(cinfo, message);
    vips_error("viewerd", "jpeg encoder: %s", message);
    longjmp(((jpeg_error *)cinfo->err)->jump, 1);
}

// libvips' jpegsave prints warnings; an encoder given whole rows has none to give.
static void jpeg_output_message(j_common_ptr cinfo) { (void)cinfo; }

// A destination that grows a g_malloc'd buffer (the caller frees it with g_free, on error too).
typedef struct {
    struct jpeg_destination_mgr pub;
    JOCTET *data;
    size_t size;
} grown_destination;

static void destination_init(j_compress_ptr cinfo) {
    grown_destination *d = (grown_destination *)cinfo->dest;
    d->size = 16384;
    d->data = g_malloc(d->size);
    d->pub.next_output_byte = d->data;
    d->pub.free_in_buffer = d->size;
}

// Called when the whole buffer is full.
static boolean destination_grow(j_compress_ptr cinfo) {
    grown_destination *d = (grown_destination *)cinfo->dest;
    d->data = g_realloc(d->data, d->size * 2);
    d->pub.next_output_byte = d->data + d->size;
    d->pub.free_in_buffer = d->size;
    d->size *= 2;
    return TRUE;
}

static void destination_term(j_compress_ptr cinfo) { (void)cinfo; }

typedef struct {
    struct jpeg_compress_struct cinfo;
    jpeg_error err;
    grown_destination destination;
    JSAMPROW *rows;
    // Made before the setjmp: libjpeg's error_exit longjmps out of each_strip.
    VipsRegion *region;
} jpeg_writer;

static int write_strip(void *context, VipsRegion *region, int top, int height) {
    jpeg_writer *w = context;
    for (int y = 0; y < height; y++) w->rows[y] = VIPS_REGION_ADDR(region, 0, top + y);
    jpeg_write_scanlines(&w->cinfo, w->rows, (JDIMENSION)height);
    return 0;
}

int shim_save_jpeg_direct(VipsImage *in, int quality, int optimize_coding, vs_cancel *cancel, void **buf,
                          size_t *len) {
    // What libvips' saver would convert first (CMYK, 16-bit, coded, alpha) is left to it.
    int grey = in->Bands == 1 && in->Type == VIPS_INTERPRETATION_B_W;
    int rgb = in->Bands == 3 && in->Type == VIPS_INTERPRETATION_sRGB;
    if (in->BandFmt != VIPS_FORMAT_UCHAR || in->Coding != VIPS_CODING_NONE || !(grey || rgb)) return 1;
    int tile_width, tile_height, n_lines;
    vips_get_tile_size(in, &tile_width, &tile_height, &n_lines);
    // Volatile: read after the longjmp.
    // Everything allocated here is freed below on both paths, after a longjmp too.
    jpeg_writer *volatile w = g_new0(jpeg_writer, 1);
    w->region = vips_region_new(in);
    if (!w->region) {
        g_free(w);
        return -1;
    }
    w->rows = g_new(JSAMPROW, tile_height);
    w->cinfo.err = jpeg_std_error(&w->err.pub);
    w->err.pub.error_exit = jpeg_error_exit;
    w->err.pub.output_message = jpeg_output_message;
    int result = -1;
    if (setjmp(w->err.jump) == 0) {
        jpeg_create_compress(&w->cinfo);
        w->destination.pub.init_destination = destination_init;
        w->destination.pub.empty_output_buffer = destination_grow;
        w->destination.pub.term_destination = destination_term;
        w->cinfo.dest = &w->destination.pub;
        w->cinfo.image_width = (JDIMENSION)in->Xsize;
        w->cinfo.image_height = (JDIMENSION)in->Ysize;
        w->cinfo.input_components = in->Bands;
        w->cinfo.in_color_space = grey ? JCS_GRAYSCALE : JCS_RGB;
        // libvips 8.14's write_vips (vips2jpeg.c) with Q, optimize_coding, strip, no
        // interlace and the defaults of everything else (libjpeg-turbo has no extension
        // parameters): chroma subsampled below Q 90, no JFIF header when stripping.
        jpeg_set_defaults(&w->cinfo);
        w->cinfo.optimize_coding = optimize_coding ? TRUE : FALSE;
        jpeg_set_quality(&w->cinfo, quality, TRUE);
        if (quality >= 90) {
            for (int i = 0; i < in->Bands; i++) {
                w->cinfo.comp_info[i].h_samp_factor = 1;
                w->cinfo.comp_info[i].v_samp_factor = 1;
            }
        }
        w->cinfo.write_JFIF_header = FALSE;
        jpeg_start_compress(&w->cinfo, TRUE);
        if (each_strip(in, w->region, cancel, write_strip, w) == 0) {
            jpeg_finish_compress(&w->cinfo);
            result = 0;
        }
    }
    jpeg_destroy_compress(&w->cinfo);
    if (result == 0) {
        *buf = w->destination.data;
        *len = w->destination.size - w->destination.pub.free_in_buffer;
    } else {
        g_free(w->destination.data);
    }
    g_object_unref(w->region);
    g_free(w->rows);
    g_free(w);
    return result;
}

typedef struct {
    VipsPel *pixels;
    size_t line;
} raw_writer;

static int copy_strip(void *context, VipsRegion *region, int top, int height) {
    raw_writer *w = context;
    for (int y = 0; y < height; y++) memcpy(w->pixels + w->line * (top + y), VIPS_REGION_ADDR(region, 0, top + y), w->line);
    return 0;
}

int shim_save_raw_direct(VipsImage *in, vs_cancel *cancel, void **buf, size_t *len) {
    raw_writer w = {.line = VIPS_IMAGE_SIZEOF_LINE(in)};
    size_t size = w.line * (size_t)in->Ysize;
    w.pixels = g_try_malloc(size ? size : 1);
    if (!w.pixels) {
        vips_error("viewerd", "out of memory for %zu bytes of pixels", size);
        return -1;
    }
    VipsRegion *region = vips_region_new(in);
    int failed = !region || each_strip(in, region, cancel, copy_strip, &w);
    if (region) g_object_unref(region);
    if (failed) {
        g_free(w.pixels);
        return -1;
    }
    *buf = w.pixels;
    *len = size;
    return 0;
}
