// Camera RAW through LibRaw (issue 31; docs/RENDERING.md, "Camera RAW"). Each call maps the
// daemon's descriptor read-only and opens it as a buffer: LibRaw opens no file, and only the
// pages it reads are touched (an embedded preview reads its own bytes and the headers, not
// the sensor data). The pixels go back to the Rendering module, which gives them to libvips.
#include "raw_shim.h"
#include "raw_extents.h"

#include <errno.h>
#include <libraw/libraw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

// A RAW open on a mapping of the daemon's descriptor.
typedef struct {
    libraw_data_t *raw;
    void *map;
    size_t length;
    int data_errors;  // LibRaw's data-error callbacks: data it could not decode,
    int ended;        // and of them reads past the end of the file
} opened;

static void count_data_error(void *data, const char *file, const int offset) {
    (void)file;
    opened *o = data;
    o->data_errors++;
    if (offset < 0) o->ended = 1;
}

static void say(char *message, size_t length, const char *what, const char *detail) {
    if (message && length) snprintf(message, length, "%s%s%s", what, detail ? ": " : "", detail ? detail : "");
}

// LibRaw's codes as ours: what it cannot read is unsupported, what runs out is damaged.
static int status_of(int code) {
    switch (code) {
    case LIBRAW_FILE_UNSUPPORTED:
    case LIBRAW_NO_THUMBNAIL:
    case LIBRAW_UNSUPPORTED_THUMBNAIL: return VR_UNSUPPORTED;
    case LIBRAW_TOO_BIG:
    case LIBRAW_UNSUFFICIENT_MEMORY: return VR_TOO_LARGE;
    case LIBRAW_CANCELLED_BY_CALLBACK: return VR_CANCELLED;
    default: return VR_DAMAGED;
    }
}

static void close_raw(opened *o) {
    if (o->raw) libraw_close(o->raw);
    if (o->map) munmap(o->map, o->length);
}

// Whether the file holds what its directories promise, before a byte of pixels is read. The
// buffer LibRaw reads from fills what lies past its end with nothing (an uncompressed sensor
// goes on as zeros), so a file cut in its sensor data is refused here, whatever is asked of
// it, as other formats' truncated files are. And a sensor larger than the file could hold
// lies: compressed sensor data does not go below about a bit a sample, 16 pixels a byte
// leaves room for a black frame's best.
static int check_extents(opened *o, char *message, size_t message_length) {
    libraw_data_t *raw = o->raw;
    vr_extents extents = vr_extents_of(raw);
    int64_t length = (int64_t)o->length;
    int64_t needed = extents.data_offset + (extents.data_size > 0 ? extents.data_size : 0);
    char detail[160];
    if (extents.data_offset > length || needed > length) {
        snprintf(detail, sizeof(detail), "%lld of the %lld bytes its sensor data needs: still being copied?",
                 (long long)length, (long long)needed);
        say(message, message_length, "the file is truncated", detail);
        close_raw(o);
        return VR_TRUNCATED;
    }
    int64_t pixels = (int64_t)raw->sizes.raw_width * raw->sizes.raw_height;
    if (pixels > 16 * length) {
        snprintf(detail, sizeof(detail), "a %dx%d sensor in a file of %lld bytes", raw->sizes.raw_width,
                 raw->sizes.raw_height, (long long)length);
        say(message, message_length, "its header lies", detail);
        close_raw(o);
        return VR_DAMAGED;
    }
    return 0;
}

static int open_raw(int fd, opened *o, char *message, size_t message_length) {
    memset(o, 0, sizeof(*o));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        say(message, message_length, "not a regular, non-empty file", NULL);
        return VR_UNSUPPORTED;
    }
    o->length = (size_t)st.st_size;
    o->map = mmap(NULL, o->length, PROT_READ, MAP_PRIVATE, fd, 0);
    if (o->map == MAP_FAILED) {
        // ENOMEM: the mapping does not fit the worker's address-space limit (the file's
        // length is in the cost, so this is a file too large for the limits, not a bad one).
        int mapping = errno;
        o->map = NULL;
        say(message, message_length, mapping == ENOMEM ? "too large" : "the file could not be mapped",
            mapping == ENOMEM ? "the file does not fit the worker's memory limit" : strerror(mapping));
        return mapping == ENOMEM ? VR_TOO_LARGE : VR_DAMAGED;
    }
    // No memory-error callback writing to stderr (LIBRAW_OPIONS_NO_MEMERR_CALLBACK, spelt as
    // a number because 0.20's header misspells it); the data-error one is ours, and counts.
    o->raw = libraw_init(1);
    if (!o->raw) {
        close_raw(o);
        say(message, message_length, "LibRaw could not start", NULL);
        return VR_TOO_LARGE;
    }
    libraw_set_dataerror_handler(o->raw, count_data_error, o);
    int code = libraw_open_buffer(o->raw, o->map, o->length);
    if (code != LIBRAW_SUCCESS) {
        say(message, message_length, "LibRaw", libraw_strerror(code));
        int status = status_of(code);
        close_raw(o);
        return status;
    }
    return check_extents(o, message, message_length);
}

// LibRaw's flip (dcraw's: 4 swaps the axes, 2 mirrors rows, 1 columns) as the EXIF orientation
// that turns the developed photo upright.
static int orientation_of(int flip) {
    static const int exif[8] = {1, 2, 4, 3, 5, 8, 6, 7};
    return exif[flip & 7];
}

int vr_info_fd(int fd, vr_info *out, char *message, size_t message_length) {
    memset(out, 0, sizeof(*out));
    opened o;
    int status = open_raw(fd, &o, message, message_length);
    if (status) return status;
    libraw_data_t *raw = o.raw;
    int flip = raw->sizes.flip;
    out->orientation = orientation_of(flip);
    out->is_dng = raw->idata.dng_version != 0;
    snprintf(out->make, sizeof(out->make), "%s", raw->idata.make);
    snprintf(out->model, sizeof(out->model), "%s", raw->idata.model);
    switch (raw->thumbnail.tformat) {
    case LIBRAW_THUMBNAIL_JPEG: out->preview_kind = VR_PREVIEW_JPEG; break;
    case LIBRAW_THUMBNAIL_BITMAP:
    case LIBRAW_THUMBNAIL_BITMAP16: out->preview_kind = VR_PREVIEW_BITMAP; break;
    case LIBRAW_THUMBNAIL_UNKNOWN: out->preview_kind = raw->thumbnail.tlength ? VR_PREVIEW_UNPACKED : VR_PREVIEW_NONE; break;
    default: out->preview_kind = VR_PREVIEW_OTHER; break;
    }
    out->preview_width = raw->thumbnail.twidth;
    out->preview_height = raw->thumbnail.theight;
    // The developed size as dcraw_process makes it (pixel aspect and Fuji's rotated sensors
    // applied), with the axes it swaps for the flip swapped back: the turn is the caller's.
    if (libraw_adjust_sizes_info_only(raw) != LIBRAW_SUCCESS) {
        close_raw(&o);
        say(message, message_length, "LibRaw could not size the photo", NULL);
        return VR_DAMAGED;
    }
    int w = raw->sizes.iwidth, h = raw->sizes.iheight;
    if (flip & 4) { int t = w; w = h; h = t; }
    out->width = w;
    out->height = h;
    close_raw(&o);
    if (w <= 0 || h <= 0) {
        say(message, message_length, "LibRaw found no image in the file", NULL);
        return VR_DAMAGED;
    }
    return 0;
}

// Copies LibRaw's image out to memory the caller owns.
static int take_image(libraw_processed_image_t *image, vr_image *out, char *message, size_t message_length) {
    if (image->type == LIBRAW_IMAGE_BITMAP && !((image->colors == 1 || image->colors == 3) &&
                                                 (image->bits == 8 || image->bits == 16))) {
        say(message, message_length, "the embedded preview has pixels viewerd does not read", NULL);
        return VR_UNSUPPORTED;
    }
    out->data = malloc(image->data_size ? image->data_size : 1);
    if (!out->data) {
        say(message, message_length, "out of memory for the image", NULL);
        return VR_TOO_LARGE;
    }
    memcpy(out->data, image->data, image->data_size);
    out->length = image->data_size;
    out->kind = image->type == LIBRAW_IMAGE_JPEG ? VR_PREVIEW_JPEG : VR_PREVIEW_BITMAP;
    out->width = image->width;
    out->height = image->height;
    out->bands = image->colors;
    out->bits = image->bits;
    return 0;
}

int vr_preview_fd(int fd, int64_t max_pixels, vr_image *out, char *message, size_t message_length) {
    memset(out, 0, sizeof(*out));
    opened o;
    int status = open_raw(fd, &o, message, message_length);
    if (status) return status;
    // The preview's own limit, before a byte of it is read: its declared pixels (the caller
    // checks a JPEG's own, which it reads from the bytes) and its bytes inside the file.
    libraw_thumbnail_t *thumbnail = &o.raw->thumbnail;
    if ((int64_t)thumbnail->twidth * thumbnail->theight > max_pixels) {
        char detail[96];
        snprintf(detail, sizeof(detail), "a %dx%d preview, over the limit of %lld pixels", thumbnail->twidth,
                 thumbnail->theight, (long long)max_pixels);
        say(message, message_length, "too large", detail);
        close_raw(&o);
        return VR_TOO_LARGE;
    }
    if (thumbnail->tlength && vr_extents_of(o.raw).preview_offset + (int64_t)thumbnail->tlength > (int64_t)o.length) {
        say(message, message_length, "the file is truncated", "its embedded preview ends past the end of the file");
        close_raw(&o);
        return VR_TRUNCATED;
    }
    int code = thumbnail->tlength ? libraw_unpack_thumb(o.raw) : LIBRAW_NO_THUMBNAIL;
    libraw_processed_image_t *image = NULL;
    if (code == LIBRAW_SUCCESS) image = libraw_dcraw_make_mem_thumb(o.raw, &code);
    if (!image) {
        say(message, message_length, "no usable embedded preview", libraw_strerror(code));
        close_raw(&o);
        return code == LIBRAW_SUCCESS ? VR_UNSUPPORTED : status_of(code);
    }
    status = take_image(image, out, message, message_length);
    libraw_dcraw_clear_mem(image);
    close_raw(&o);
    return status;
}

typedef struct {
    vr_cancel_fn fn;
    void *context;
} cancel_check;

static int progress(void *data, enum LibRaw_progress stage, int iteration, int expected) {
    (void)stage, (void)iteration, (void)expected;
    const cancel_check *check = data;
    return check->fn && check->fn(check->context) ? 1 : 0;
}

int vr_develop_fd(int fd, int half, int64_t max_pixels, vr_cancel_fn cancel, void *cancel_context, vr_image *out,
                  char *message, size_t message_length) {
    memset(out, 0, sizeof(*out));
    opened o;
    int status = open_raw(fd, &o, message, message_length);
    if (status) return status;
    libraw_data_t *raw = o.raw;
    if ((int64_t)raw->sizes.raw_width * raw->sizes.raw_height > max_pixels) {
        char detail[96];
        snprintf(detail, sizeof(detail), "a %dx%d sensor, over the limit of %lld pixels", raw->sizes.raw_width,
                 raw->sizes.raw_height, (long long)max_pixels);
        say(message, message_length, "too large", detail);
        close_raw(&o);
        return VR_TOO_LARGE;
    }
    // dcraw_emu's defaults (AHD, sRGB, auto brightness) but the camera's white balance, 8 bits,
    // and no turn (libvips turns by the orientation, as for every photo).
    raw->params.half_size = half ? 1 : 0;
    raw->params.use_camera_wb = 1;
    raw->params.output_bps = 8;
    raw->params.user_flip = 0;
    cancel_check check = {cancel, cancel_context};
    libraw_set_progress_handler(raw, progress, &check);
    int code = libraw_unpack(raw);
    if (o.data_errors) {
        // LibRaw goes on over data it cannot decode (and, at the end of the file, stops): the
        // photo would be stored with what it made up.
        say(message, message_length, o.ended ? "the file is truncated" : "the sensor data does not decode",
            o.ended ? "its sensor data ends past the end of the file: still being copied?" : libraw_strerror(code));
        close_raw(&o);
        return o.ended ? VR_TRUNCATED : VR_DAMAGED;
    }
    if (code == LIBRAW_SUCCESS) code = libraw_dcraw_process(raw);
    libraw_processed_image_t *image = NULL;
    if (code == LIBRAW_SUCCESS) image = libraw_dcraw_make_mem_image(raw, &code);
    if (!image) {
        say(message, message_length, "LibRaw", libraw_strerror(code));
        close_raw(&o);
        return status_of(code);
    }
    status = take_image(image, out, message, message_length);
    libraw_dcraw_clear_mem(image);
    close_raw(&o);
    return status;
}

void vr_free(void *p) { free(p); }
