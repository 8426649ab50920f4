// libvips' start, its error buffer and kept warning, one render's cancel request, and the
// error attribution gate. See include/vips_shim.h.
#include "shim_private.h"

#include <pthread.h>
#include <stdatomic.h>

// Some loaders fail with nothing in the error buffer and say why only in a GLib warning
// (libspng on a truncated PNG: "not enough data"). The last warning is kept here, instead of
// going to stderr without a file name, and stands in for an empty error message.
static pthread_mutex_t warning_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_warning[256];

static void on_vips_warning(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer user) {
    (void)domain;
    (void)level;
    (void)user;
    pthread_mutex_lock(&warning_lock);
    g_strlcpy(last_warning, message ? message : "", sizeof(last_warning));
    pthread_mutex_unlock(&warning_lock);
}

static pthread_rwlock_t gate;
// One render's cancel request: set by another thread (the worker's reader, on CANCEL), read
// by libvips' threads in on_eval. An atomic, not a volatile (a data race ThreadSanitizer found
// in make sanitize). One per render, so a cancel stops that render and no other one running
// in the same process.
struct vs_cancel {
    atomic_int requested;
};

vs_cancel *vs_cancel_new(void) { return g_new0(vs_cancel, 1); }
void vs_cancel_free(vs_cancel *cancel) { g_free(cancel); }
void vs_cancel_request(vs_cancel *cancel) { atomic_store_explicit(&cancel->requested, 1, memory_order_relaxed); }
int vs_cancel_requested(const vs_cancel *cancel) {
    return atomic_load_explicit(&((vs_cancel *)cancel)->requested, memory_order_relaxed);
}

// Called by libvips as the pipeline is evaluated; kills it when its cancel was requested.
void shim_on_eval(VipsImage *image, VipsProgress *progress, void *user) {
    (void)progress;
    if (user && vs_cancel_requested(user)) vips_image_set_kill(image, TRUE);
}

void vs_gate_shared_begin(void) { pthread_rwlock_rdlock(&gate); }
void vs_gate_shared_end(void) { pthread_rwlock_unlock(&gate); }
void vs_gate_exclusive_begin(void) { pthread_rwlock_wrlock(&gate); }
void vs_gate_exclusive_end(void) { pthread_rwlock_unlock(&gate); }

int vs_init(const char *argv0, int allow_svg, int allow_pdf, int allow_jxl, int allow_jp2k) {
    // Writers first: a failure waiting for its exact message must not starve behind renders.
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&gate, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (VIPS_INIT(argv0 ? argv0 : "viewerd")) return -1;
    // The operation cache would hold decoded images between jobs and, on 8.14, can return
    // stale pixels for a file rewritten in place.
    vips_cache_set_max(0);
    vips_cache_set_max_mem(0);
    // One thread per render: parallelism comes from rendering several images at once.
    vips_concurrency_set(1);
    vips_leak_set(FALSE);
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING, on_vips_warning, NULL);
    // ImageMagick, FITS, raw, matrix, CSV, OpenSlide, ... are attack surface with little
    // use for a viewer. SVG, PDF, JPEG XL and JPEG 2000 are "untrusted" in 8.14 but wanted;
    // the caller chooses.
    vips_block_untrusted_set(TRUE);
    if (allow_svg) vips_operation_block_set("VipsForeignLoadSvg", FALSE);
    if (allow_pdf) vips_operation_block_set("VipsForeignLoadPdf", FALSE);
    if (allow_jxl) vips_operation_block_set("VipsForeignLoadJxl", FALSE);
    if (allow_jp2k) vips_operation_block_set("VipsForeignLoadJp2k", FALSE);  // JPEG 2000 (OpenJPEG), issue 31
    return 0;
}

void vs_thread_shutdown(void) { vips_thread_shutdown(); }

void vs_errors_reset(void) {
    vips_error_clear();
    pthread_mutex_lock(&warning_lock);
    last_warning[0] = 0;
    pthread_mutex_unlock(&warning_lock);
}

char *vs_error_take(void) {
    // vips_error_buffer_copy copies and clears under libvips' own lock.
    char *text = vips_error_buffer_copy();
    pthread_mutex_lock(&warning_lock);
    int empty = !text || !*g_strstrip(text);
    if (empty && last_warning[0]) {
        g_free(text);
        text = g_strdup(last_warning);
    }
    last_warning[0] = 0;
    pthread_mutex_unlock(&warning_lock);
    return text ? text : g_strdup("");
}

void vs_free(void *p) { g_free(p); }

void vs_unref(VipsImage *image) {
    if (image) g_object_unref(image);
}

void vs_image_size(VipsImage *image, int *width, int *height, int *bands) {
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *bands = vips_image_get_bands(image);
}

int vs_image_icc(VipsImage *image, const void **data, size_t *length) {
    *data = NULL;
    *length = 0;
    return vips_image_get_typeof(image, VIPS_META_ICC_NAME) && !vips_image_get_blob(image, VIPS_META_ICC_NAME, data, length);
}
