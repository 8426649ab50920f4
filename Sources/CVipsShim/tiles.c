// A whole image computed once, top to bottom, handed over in bands: a level's tiles (vs_sink_bands).
#include "shim_private.h"

#include <pthread.h>
#include <string.h>

// libvips calls band_write from its write thread, one strip after another, and returns from
// vips_sink_disc after the last; its ordering (GLib's semaphores) is invisible to
// ThreadSanitizer, so `lock` orders the state, and the callee's, where TSan can see it (make
// sanitize found the caller's final flush racing the write thread's last one).
typedef struct {
    pthread_mutex_t lock;
    VipsImage *image;
    int band_height;
    size_t line;      // bytes a row
    VipsPel *buffer;  // band_height rows
    int filled;       // rows in the buffer
    int top;          // the buffer's first row in the image
    vs_band_fn fn;
    void *context;
} band_sink;

// Hands the rows gathered so far to the callee as one band.
static int band_flush(band_sink *sink) {
    if (sink->filled == 0) return 0;
    VipsImage *pixels = vips_image_new_from_memory_copy(sink->buffer, sink->line * sink->filled, sink->image->Xsize,
                                                        sink->filled, sink->image->Bands, VIPS_FORMAT_UCHAR);
    if (!pixels) return -1;
    VipsImage *band = NULL;
    int r = vips_copy(pixels, &band, "interpretation", sink->image->Type, NULL);
    g_object_unref(pixels);
    if (r) return -1;
    int top = sink->top;
    sink->top += sink->filled;
    sink->filled = 0;
    return sink->fn(sink->context, band, top) ? -1 : 0;
}

// libvips' sink hands the image over in full-width strips, top to bottom, one at a time.
static int band_write(VipsRegion *region, VipsRect *area, void *a) {
    band_sink *sink = a;
    int result = 0;
    pthread_mutex_lock(&sink->lock);
    for (int y = 0; y < area->height && result == 0; y++) {
        memcpy(sink->buffer + sink->line * sink->filled, VIPS_REGION_ADDR(region, area->left, area->top + y), sink->line);
        if (++sink->filled == sink->band_height) result = band_flush(sink);
    }
    pthread_mutex_unlock(&sink->lock);
    return result;
}

int vs_sink_bands(VipsImage *in, int band_height, vs_cancel *cancel, vs_band_fn fn, void *context) {
    VipsImage *img = NULL;
    if (shim_to_srgb8(in, &img)) return -1;
    if (cancel) {
        vips_image_set_progress(img, TRUE);
        g_signal_connect(img, "eval", G_CALLBACK(shim_on_eval), cancel);
    }
    band_sink sink = {.image = img, .band_height = band_height, .line = VIPS_IMAGE_SIZEOF_LINE(img),
                      .fn = fn, .context = context};
    pthread_mutex_init(&sink.lock, NULL);
    // Released here and acquired by the write thread's first strip: the callee's state, set
    // up by the caller, is seen there.
    pthread_mutex_lock(&sink.lock);
    sink.buffer = g_try_malloc(sink.line * band_height);
    pthread_mutex_unlock(&sink.lock);
    int result = -1;
    if (!sink.buffer) {
        vips_error("viewerd", "out of memory for a band of %d rows", band_height);
    } else {
        int sunk = vips_sink_disc(img, band_write, &sink);
        // Taken even with nothing left to flush: what the callee did on the write thread
        // happens before what its caller does next.
        pthread_mutex_lock(&sink.lock);
        if (sunk == 0) result = band_flush(&sink);
        pthread_mutex_unlock(&sink.lock);
    }
    pthread_mutex_destroy(&sink.lock);
    g_free(sink.buffer);
    g_object_unref(img);
    return result;
}
