// Fixed-arity wrappers of the libvips calls viewerd uses. See include/vips_shim.h.
#include "vips_shim.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/stat.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <vips/vips.h>

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
static void on_eval(VipsImage *image, VipsProgress *progress, void *user) {
    (void)progress;
    if (user && vs_cancel_requested(user)) vips_image_set_kill(image, TRUE);
}

void vs_gate_shared_begin(void) { pthread_rwlock_rdlock(&gate); }
void vs_gate_shared_end(void) { pthread_rwlock_unlock(&gate); }
void vs_gate_exclusive_begin(void) { pthread_rwlock_wrlock(&gate); }
void vs_gate_exclusive_end(void) { pthread_rwlock_unlock(&gate); }

int vs_init(const char *argv0, int allow_svg, int allow_pdf, int allow_jxl) {
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
    // use for a viewer. SVG, PDF and JPEG XL are "untrusted" in 8.14 but wanted; the caller
    // chooses.
    vips_block_untrusted_set(TRUE);
    if (allow_svg) vips_operation_block_set("VipsForeignLoadSvg", FALSE);
    if (allow_pdf) vips_operation_block_set("VipsForeignLoadPdf", FALSE);
    if (allow_jxl) vips_operation_block_set("VipsForeignLoadJxl", FALSE);
    vv_init();  // FFmpeg's log into failure messages (video.c)
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

// The reader behind source_for_fd: its own duplicate of the descriptor, read with pread at
// its own position (the offset of an open file is shared with every copy of the descriptor,
// the daemon's included), and a render's cancel request. libvips reads a source from one
// thread at a time but from several threads in turn, ordered by its own (GLib) locks, which
// ThreadSanitizer cannot see; `lock` orders our state where it can.
typedef struct {
    pthread_mutex_t lock;
    int fd;
    gint64 position;
    vs_cancel *cancel;
} fd_reader;

static gint64 fd_read(VipsSourceCustom *custom, void *buffer, gint64 length, fd_reader *reader) {
    (void)custom;
    // libvips checks a pipeline's kill flag between regions, and one region of a large PNG or
    // a progressive JPEG shrunk to a thumbnail is the whole decode: the codec's reads are
    // where a cancel can reach inside it.
    if (reader->cancel && vs_cancel_requested(reader->cancel)) {
        vips_error("viewerd", "cancelled");
        return -1;
    }
    pthread_mutex_lock(&reader->lock);
    ssize_t n;
    do n = pread(reader->fd, buffer, (size_t)length, (off_t)reader->position); while (n < 0 && errno == EINTR);
    if (n > 0) reader->position += n;
    pthread_mutex_unlock(&reader->lock);
    return n;
}

static gint64 fd_seek(VipsSourceCustom *custom, gint64 offset, int whence, fd_reader *reader) {
    (void)custom;
    pthread_mutex_lock(&reader->lock);
    gint64 base = reader->position, result = -1;
    struct stat st;
    if (whence == SEEK_SET) base = 0;
    if (whence == SEEK_END) base = fstat(reader->fd, &st) == 0 ? st.st_size : -1;
    if (base >= 0 && base + offset >= 0) result = reader->position = base + offset;
    pthread_mutex_unlock(&reader->lock);
    return result;
}

static void fd_reader_free(gpointer data, GObject *finalized) {
    (void)finalized;
    fd_reader *reader = data;
    close(reader->fd);
    pthread_mutex_destroy(&reader->lock);
    g_free(reader);
}

// A source reading the file open on `fd` from its start; reads fail once `cancel` (may be
// NULL) is requested.
static VipsSource *source_for_fd(int fd, vs_cancel *cancel) {
    int copy = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0) {
        vips_error("viewerd", "cannot duplicate the descriptor: %s", g_strerror(errno));
        return NULL;
    }
    fd_reader *reader = g_new0(fd_reader, 1);
    pthread_mutex_init(&reader->lock, NULL);
    reader->fd = copy;
    reader->cancel = cancel;
    VipsSourceCustom *custom = vips_source_custom_new();
    g_signal_connect(custom, "read", G_CALLBACK(fd_read), reader);
    g_signal_connect(custom, "seek", G_CALLBACK(fd_seek), reader);
    g_object_weak_ref(G_OBJECT(custom), fd_reader_free, reader);
    return VIPS_SOURCE(custom);
}

static uint32_t be32(const uint8_t *p) { return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]; }

// The tag `signature` of an ICC profile: its data and size, bounds-checked; NULL if absent.
static const uint8_t *icc_tag(const uint8_t *icc, size_t length, const char *signature, size_t *size) {
    uint32_t count = be32(icc + 128);
    for (uint32_t i = 0; i < count && 132 + (size_t)(i + 1) * 12 <= length; i++) {
        const uint8_t *entry = icc + 132 + (size_t)i * 12;
        if (memcmp(entry, signature, 4) != 0) continue;
        size_t offset = be32(entry + 4);
        *size = be32(entry + 8);
        if (offset > length || *size > length - offset || *size < 12) return NULL;
        return icc + offset;
    }
    return NULL;
}

// An 'XYZ ' tag's X, Y, Z (s15Fixed16) within `tolerance` of the ones given.
static int icc_xyz_near(const uint8_t *icc, size_t length, const char *signature, const double expected[3]) {
    size_t size = 0;
    const uint8_t *tag = icc_tag(icc, length, signature, &size);
    if (!tag || size < 20 || memcmp(tag, "XYZ ", 4) != 0) return 0;
    for (int k = 0; k < 3; k++) {
        double value = (int32_t)be32(tag + 8 + 4 * k) / 65536.0;
        if (value < expected[k] - 0.003 || value > expected[k] + 0.003) return 0;
    }
    return 1;
}

// Whether a TRC tag is an sRGB-like curve: a gamma of 2.2-2.5 (2.2 in u8Fixed8 is 2.199) ('curv' with one entry, 'para'),
// or a table whose middle is sRGB's (0.214 at 0.5); not linear (a 'curv' of no entries).
static int icc_trc_srgb(const uint8_t *icc, size_t length, const char *signature) {
    size_t size = 0;
    const uint8_t *tag = icc_tag(icc, length, signature, &size);
    if (!tag) return 0;
    if (memcmp(tag, "curv", 4) == 0) {
        uint32_t entries = be32(tag + 8);
        if (entries == 1 && size >= 14) {
            double gamma = (tag[12] << 8 | tag[13]) / 256.0;
            return gamma >= 2.15 && gamma <= 2.5;
        }
        if (entries < 16 || (size - 12) / 2 < entries) return 0;
        size_t middle = entries / 2;
        double value = (tag[12 + 2 * middle] << 8 | tag[13 + 2 * middle]) / 65535.0;
        return value >= 0.19 && value <= 0.24;
    }
    if (memcmp(tag, "para", 4) == 0 && size >= 16) {
        double gamma = (int32_t)be32(tag + 12) / 65536.0;
        return gamma >= 2.15 && gamma <= 2.5;
    }
    return 0;
}

// Whether an ICC profile describes sRGB, so that converting to sRGB through it changes no pixel
// by more than rounding: an RGB profile with sRGB's primaries (D50-adapted, as profiles store
// them) and sRGB-like tone curves, whatever it is called ("sRGB IEC61966-2.1", "sRGB built-in",
// what cameras and editors write). A linear-light "sRGB" (GIMP's, Krita's g10) is not one.
// Converting such a photo through LCMS tripled the cost of a full-size decode.
int vs_icc_is_srgb(const uint8_t *icc, size_t length) {
    if (!icc || length < 132 || memcmp(icc + 16, "RGB ", 4) != 0) return 0;
    static const double red[3] = {0.4361, 0.2225, 0.0139}, green[3] = {0.3851, 0.7169, 0.0971},
                        blue[3] = {0.1431, 0.0606, 0.7141};
    return icc_xyz_near(icc, length, "rXYZ", red) && icc_xyz_near(icc, length, "gXYZ", green)
        && icc_xyz_near(icc, length, "bXYZ", blue) && icc_trc_srgb(icc, length, "rTRC")
        && icc_trc_srgb(icc, length, "gTRC") && icc_trc_srgb(icc, length, "bTRC");
}

int vs_header_fd(int fd, vs_header *out) {
    memset(out, 0, sizeof(*out));
    VipsSource *source = source_for_fd(fd, NULL);
    if (!source) return -1;
    const char *loader = vips_foreign_find_load_source(source);
    if (!loader) {
        g_object_unref(source);
        return -2;  // not a format we load (or a blocked loader)
    }
    VipsImage *image = vips_image_new_from_source(source, "", "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    g_object_unref(source);
    if (!image) return -1;
    out->width = vips_image_get_width(image);
    out->height = vips_image_get_page_height(image);
    out->bands = vips_image_get_bands(image);
    out->pages = vips_image_get_n_pages(image);
    out->bits = (int)vips_format_sizeof(vips_image_get_format(image)) * 8;
    out->orientation = vips_image_get_orientation(image);
    int interlaced = 0;
    if (vips_image_get_typeof(image, "interlaced") && !vips_image_get_int(image, "interlaced", &interlaced))
        out->interlaced = interlaced;
    out->has_icc = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
    const void *icc = NULL;
    size_t icc_length = 0;
    if (out->has_icc && !vips_image_get_blob(image, VIPS_META_ICC_NAME, &icc, &icc_length))
        out->icc_srgb = vs_icc_is_srgb(icc, icc_length);
    out->cmyk = vips_image_get_interpretation(image) == VIPS_INTERPRETATION_CMYK;
    out->xres = image->Xres;
    out->yres = image->Yres;
    // find_load_source gives the class name; report the nickname people know ("jpegload_source").
    const char *nickname = vips_nickname_find(g_type_from_name(loader));
    g_strlcpy(out->loader, nickname ? nickname : loader, sizeof(out->loader));
    g_object_unref(image);
    return 0;
}

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
    VipsSource *source = source_for_fd(fd, cancel);
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

// Frees a shrink's pixels when its image closes.
static void free_pixels(VipsImage *image, void *pixels) {
    (void)image;
    g_free(pixels);
}

// libvips' thumbnail of an image with alpha premultiplies the whole decoded image in float
// before it shrinks: for a 5120x2880 RGBA PNG that costs as much as the decode (0.37 s of CPU
// against 0.20 s for the same picture flattened). This box shrink does the same weighting
// with integer sums, reading the image once in strips, top to bottom (sequential access).
int vs_alpha_shrink_fd(int fd, int k, int fail_on_truncated, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    VipsSource *source = source_for_fd(fd, cancel);
    if (!source) return -1;
    VipsImage *in = vips_image_new_from_source(source, "", "access", VIPS_ACCESS_SEQUENTIAL, "fail_on",
                                               fail_on_truncated ? VIPS_FAIL_ON_TRUNCATED : VIPS_FAIL_ON_NONE, NULL);
    g_object_unref(source);
    if (!in) return -1;
    int width = vips_image_get_width(in), height = vips_image_get_height(in);
    if (k < 2 || vips_image_get_bands(in) != 4 || vips_image_get_format(in) != VIPS_FORMAT_UCHAR ||
        vips_image_get_coding(in) != VIPS_CODING_NONE || width % k || height % k) {
        vips_error("viewerd", "not an 8-bit RGBA image whose sides are multiples of %d", k);
        g_object_unref(in);
        return -1;
    }
    int out_width = width / k, out_height = height / k;
    size_t out_bytes = (size_t)out_width * out_height * 4;
    // Strips of whole blocks, about 64 rows: a few MiB of region at most.
    int strip = k * VIPS_MAX(1, 64 / k);
    guint64 *sums = g_try_malloc0((size_t)out_width * 4 * sizeof(guint64));
    // Filled in place and handed to the image, freed when it closes (no copy).
    VipsPel *pixels = g_try_malloc(out_bytes);
    VipsRegion *region = sums && pixels ? vips_region_new(in) : NULL;
    int result = region ? 0 : -1;
    if (!region) vips_error("viewerd", "out of memory for a %dx%d shrink", out_width, out_height);
    for (int top = 0; top < height && result == 0; top += strip) {
        VipsRect rect = {0, top, width, VIPS_MIN(strip, height - top)};
        if (cancel && vs_cancel_requested(cancel)) {
            vips_error("viewerd", "cancelled");
            result = -1;
        } else if (vips_region_prepare(region, &rect)) {
            result = -1;  // the source's reads say why (a cancel among them)
        }
        for (int y = 0; y < rect.height && result == 0; y++) {
            const VipsPel *p = VIPS_REGION_ADDR(region, 0, top + y);
            for (int x = 0; x < out_width; x++) {
                guint64 *sum = sums + (size_t)x * 4;
                for (int i = 0; i < k; i++, p += 4) {
                    guint64 alpha = p[3];
                    sum[0] += p[0] * alpha;
                    sum[1] += p[1] * alpha;
                    sum[2] += p[2] * alpha;
                    sum[3] += alpha;
                }
            }
            if ((top + y + 1) % k) continue;
            // A block row is complete: its means, the colours divided by the alpha sum.
            VipsPel *q = pixels + (size_t)((top + y) / k) * out_width * 4;
            guint64 area = (guint64)k * k;
            for (int x = 0; x < out_width; x++, q += 4) {
                guint64 *sum = sums + (size_t)x * 4;
                guint64 alpha = sum[3];
                for (int band = 0; band < 3; band++) q[band] = alpha ? (VipsPel)((sum[band] + alpha / 2) / alpha) : 0;
                q[3] = (VipsPel)((alpha + area / 2) / area);
                memset(sum, 0, 4 * sizeof(guint64));
            }
        }
    }
    if (region) g_object_unref(region);
    g_free(sums);
    VipsImage *shrunk = result == 0 ? vips_image_new_from_memory(pixels, out_bytes, out_width, out_height, 4,
                                                                 VIPS_FORMAT_UCHAR) : NULL;
    if (!shrunk) {
        g_free(pixels);
        g_object_unref(in);
        return -1;
    }
    g_signal_connect(shrunk, "postclose", G_CALLBACK(free_pixels), pixels);
    // What the thumbnail and the saver read of the source: its colour space, orientation,
    // profile and resolution (libvips' own shrink keeps the resolution as it is).
    shrunk->Type = vips_image_get_interpretation(in);
    shrunk->Xres = in->Xres;
    shrunk->Yres = in->Yres;
    vips_image_set_int(shrunk, VIPS_META_ORIENTATION, vips_image_get_orientation(in));
    const void *icc = NULL;
    size_t icc_length = 0;
    if (vips_image_get_typeof(in, VIPS_META_ICC_NAME) && !vips_image_get_blob(in, VIPS_META_ICC_NAME, &icc, &icc_length))
        vips_image_set_blob_copy(shrunk, VIPS_META_ICC_NAME, icc, icc_length);
    g_object_unref(in);
    *out = shrunk;
    return 0;
}

int vs_plan_fd(int fd, int width, int height, int crop, int size, int page, int orientation, int *out_width,
               int *out_height) {
    VipsSource *source = source_for_fd(fd, NULL);
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
// an unturned box (nothing is computed).
static int plan_blank(int image_width, int image_height, int box_width, int box_height, int crop, int size, int *out_width,
                      int *out_height) {
    VipsImage *blank = NULL, *planned = NULL;
    if (vips_black(&blank, image_width, image_height, "bands", 3, NULL)) return -1;
    int result = vips_thumbnail_image(blank, &planned, box_width, "height", box_height, "crop", interesting_of(crop),
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

int vs_image_from_pixels(const void *pixels, size_t length, int width, int height, int bands, int bits,
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

int vs_jpeg_from_buffer(const void *buf, size_t len, int shrink, int orientation, VipsImage **out) {
    *out = NULL;
    VipsImage *loaded = NULL;
    if (vips_jpegload_buffer((void *)buf, len, &loaded, "shrink", shrink, "autorotate", FALSE, NULL)) return -1;
    // Decoded now: the buffer is the caller's, and a preview is small.
    VipsImage *decoded = vips_image_copy_memory(loaded);
    g_object_unref(loaded);
    if (!decoded) return -1;
    vips_image_set_int(decoded, VIPS_META_ORIENTATION, orientation);
    *out = decoded;
    return 0;
}

// An EXIF thumbnail larger than this is not used (EXIF's own limit, 64 KiB, allows about
// 640x480 at ordinary quality).
#define VS_PREVIEW_MAX_PIXELS (1024 * 1024)

// The JPEG's EXIF thumbnail (IFD1), decoded into memory and turned like the main image. A
// camera's 160x120 thumbnail of a 3:2 photo is letterboxed: it is cut to the main image's
// proportions first (the bars are the thumbnail's, not the photo's). -2 when there is none.
static int exif_thumbnail(VipsSource *source, VipsImage **out) {
    VipsImage *main = NULL;
    if (vips_jpegload_source(source, &main, "access", VIPS_ACCESS_SEQUENTIAL, NULL)) return -1;
    const void *data = NULL;
    size_t length = 0;
    if (!vips_image_get_typeof(main, "jpeg-thumbnail-data") ||
        vips_image_get_blob(main, "jpeg-thumbnail-data", &data, &length) || length < 4) {
        g_object_unref(main);
        return -2;
    }
    int mw = vips_image_get_width(main), mh = vips_image_get_height(main);
    int orientation = vips_image_get_orientation(main);
    // The blob belongs to the main image: the thumbnail is decoded (it is a few KiB) before
    // that goes. Only the JPEG loader reads it, whatever its first bytes say.
    VipsImage *thumb = NULL, *decoded = NULL;
    int r = vips_jpegload_buffer((void *)data, length, &thumb, NULL);
    // A few KiB may declare 65535x65535 of flat colour: a thumbnail is small or it is not one.
    if (!r && (gint64)vips_image_get_width(thumb) * vips_image_get_height(thumb) > VS_PREVIEW_MAX_PIXELS) {
        g_object_unref(thumb);
        g_object_unref(main);
        return -2;
    }
    if (!r) {
        decoded = vips_image_copy_memory(thumb);
        g_object_unref(thumb);
        r = decoded ? 0 : -1;
    }
    g_object_unref(main);
    if (r) return r;
    int tw = vips_image_get_width(decoded), th = vips_image_get_height(decoded);
    int cw = tw, ch = th;
    // Cut to the main image's ratio when they differ by more than a pixel's rounding.
    if ((gint64)tw * mh > (gint64)th * mw + mh) cw = (int)(((gint64)th * mw + mh / 2) / mh);
    else if ((gint64)th * mw > (gint64)tw * mh + mw) ch = (int)(((gint64)tw * mh + mw / 2) / mw);
    VipsImage *cut = NULL;
    if (cw < 1 || ch < 1) r = -2;
    else r = vips_extract_area(decoded, &cut, (tw - cw) / 2, (th - ch) / 2, cw, ch, NULL);
    g_object_unref(decoded);
    if (r) return r;
    // The thumbnail is stored the way the main image is: it turns by the main image's tag.
    VipsImage *tagged = NULL;
    r = vips_copy(cut, &tagged, NULL);
    g_object_unref(cut);
    if (r) return r;
    vips_image_set_int(tagged, VIPS_META_ORIENTATION, orientation);
    r = vips_autorot(tagged, out, NULL);
    g_object_unref(tagged);
    return r;
}

int vs_preview_fd(int fd, int kind, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    VipsSource *source = source_for_fd(fd, cancel);
    if (!source) return -1;
    const char *loader = vips_foreign_find_load_source(source);
    int jpeg = loader && strcmp(loader, "VipsForeignLoadJpegSource") == 0;
    int heif = loader && strcmp(loader, "VipsForeignLoadHeifSource") == 0;
    VipsImage *loaded = NULL;
    int result = -2;
    if (kind == VS_PREVIEW_EXIF && jpeg) {
        result = exif_thumbnail(source, out);
        g_object_unref(source);
        return result;
    }
    if (kind == VS_PREVIEW_HEIF && heif) result = vips_heifload_source(source, &loaded, "thumbnail", TRUE, NULL);
    g_object_unref(source);
    if (result) return result;
    result = vips_autorot(loaded, out, NULL);
    g_object_unref(loaded);
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

void vs_image_size(VipsImage *image, int *width, int *height, int *bands) {
    *width = vips_image_get_width(image);
    *height = vips_image_get_height(image);
    *bands = vips_image_get_bands(image);
}

// Converts to 8-bit sRGB (keeping alpha), taking a new reference in *out.
static int to_srgb8(VipsImage *in, VipsImage **out) {
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

int vs_crop(VipsImage *in, int left, int top, int width, int height, VipsImage **out) {
    *out = NULL;
    return vips_extract_area(in, out, left, top, width, height, NULL);
}

int vs_join_vertical(VipsImage *top, VipsImage *bottom, VipsImage **out) {
    *out = NULL;
    return vips_join(top, bottom, out, VIPS_DIRECTION_VERTICAL, NULL);
}

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
    if (to_srgb8(in, &img)) return -1;
    if (cancel) {
        vips_image_set_progress(img, TRUE);
        g_signal_connect(img, "eval", G_CALLBACK(on_eval), cancel);
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

// The pixels a rendition is encoded from, and nothing else: 8-bit sRGB, with every field a
// loader attached to the source removed (EXIF and its exif-ifd* copies, XMP, IPTC, maker
// notes, a PNG's text, a HEIF thumbnail item's copy of its primary's EXIF, the page and
// orientation fields). A rendition is shared between users and served to any client of the
// file, so it must not carry a GPS position or a name, and it must not depend on each saver's
// `strip` for that: 8.14.1's webpsave ignores it (and see webp_without_metadata). Pixels that
// reach here still tagged with a profile other than sRGB (a HEIF thumbnail item keeps its
// file's Display P3) are converted through it first, so that nothing the pixels need is lost;
// a profile that cannot be used (damaged) leaves them as they are, as a render without one.
static int rendition_pixels(VipsImage *in, VipsImage **out) {
    const void *icc = NULL;
    size_t icc_length = 0;
    VipsImage *converted = NULL;
    if (vips_image_get_typeof(in, VIPS_META_ICC_NAME) && !vips_image_get_blob(in, VIPS_META_ICC_NAME, &icc, &icc_length)
        && !vs_icc_is_srgb(icc, icc_length)
        && vips_icc_transform(in, &converted, "srgb", "embedded", TRUE, NULL))
        vips_error_clear();
    VipsImage *srgb = NULL, *copy = NULL;
    int r = to_srgb8(converted ? converted : in, &srgb);
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

int vs_save_buffer(VipsImage *image, int format, int quality, uint32_t background, int fast, vs_cancel *cancel,
                   void **buf, size_t *len, int *out_width, int *out_height) {
    *buf = NULL;
    *len = 0;
    VipsImage *img = NULL;
    if (rendition_pixels(image, &img)) return -1;
    if (cancel) {
        vips_image_set_progress(img, TRUE);
        g_signal_connect(img, "eval", G_CALLBACK(on_eval), cancel);
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
    int result = -1;
    switch (format) {
    case VS_FORMAT_JPEG:
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
    case VS_FORMAT_RAW: {
        VipsImage *rgba = NULL;
        if (has_alpha) {
            rgba = img;
            g_object_ref(rgba);
        } else if (vips_bandjoin_const1(img, &rgba, 255.0, NULL)) {
            break;
        }
        size_t size = 0;
        void *pixels = vips_image_write_to_memory(rgba, &size);
        if (pixels) {
            *buf = pixels;
            *len = size;
            result = 0;
        }
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
