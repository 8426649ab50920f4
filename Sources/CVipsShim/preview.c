// Cheap degraded previews: a JPEG's EXIF thumbnail, a HEIF's thumbnail item (vs_preview_fd).
#include "shim_private.h"

#include <libheif/heif.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

// libheif's reader over the descriptor, with pread at its own position (as source.c's).
typedef struct {
    int fd;
    gint64 position, size;
    vs_cancel *cancel;
} heif_fd;

static int64_t heif_fd_position(void *user) { return ((heif_fd *)user)->position; }

static int heif_fd_read(void *data, size_t size, void *user) {
    heif_fd *reader = user;
    if (reader->cancel && vs_cancel_requested(reader->cancel)) return -1;
    for (size_t done = 0; done < size;) {
        ssize_t n = pread(reader->fd, (char *)data + done, size - done, reader->position);
        if (n <= 0) return -1;
        done += (size_t)n;
        reader->position += n;
    }
    return 0;
}

static int heif_fd_seek(int64_t position, void *user) {
    ((heif_fd *)user)->position = position;
    return 0;
}

static enum heif_reader_grow_status heif_fd_wait(int64_t target, void *user) {
    return target <= ((heif_fd *)user)->size ? heif_reader_grow_status_size_reached : heif_reader_grow_status_size_beyond_eof;
}

// The HEIF's thumbnail item, decoded once by libheif, upright (libheif applies the item's
// turns, as libvips' loader has it do), with the primary image's ICC profile. libvips'
// `thumbnail` load decoded the item three times (issue 32: two thirds of a cold HEIC's INFO).
// 1 when libvips' loader is to read it instead: no thumbnail item (it offers the primary
// image), not 8-bit, larger than a thumbnail, or broken (it falls back to the primary image).
static int heif_thumbnail(int fd, vs_cancel *cancel, VipsImage **out) {
    struct stat st;
    if (fstat(fd, &st)) return 1;
    static const struct heif_reader reader = {1, heif_fd_position, heif_fd_read, heif_fd_seek, heif_fd_wait};
    heif_fd state = {fd, 0, st.st_size, cancel};
    struct heif_context *context = heif_context_alloc();
    struct heif_image_handle *primary = NULL, *thumb = NULL;
    struct heif_image *decoded = NULL;
    heif_item_id id;
    int r = 1;
    if (heif_context_read_from_reader(context, &reader, &state, NULL).code ||
        heif_context_get_primary_image_handle(context, &primary).code ||
        heif_image_handle_get_list_of_thumbnail_IDs(primary, &id, 1) < 1 ||
        heif_image_handle_get_thumbnail(primary, id, &thumb).code)
        goto done;
    if (heif_image_handle_get_luma_bits_per_pixel(thumb) != 8) goto done;
    int alpha = heif_image_handle_has_alpha_channel(thumb), bands = alpha ? 4 : 3;
    if ((gint64)heif_image_handle_get_width(thumb) * heif_image_handle_get_height(thumb) > VS_PREVIEW_MAX_PIXELS) goto done;
    struct heif_error error = heif_decode_image(thumb, &decoded, heif_colorspace_RGB,
                                                alpha ? heif_chroma_interleaved_RGBA : heif_chroma_interleaved_RGB, NULL);
    if (error.code) goto done;
    int stride = 0;
    const uint8_t *plane = heif_image_get_plane_readonly(decoded, heif_channel_interleaved, &stride);
    int w = heif_image_get_width(decoded, heif_channel_interleaved), h = heif_image_get_height(decoded, heif_channel_interleaved);
    if (!plane || w < 1 || h < 1) goto done;
    size_t line = (size_t)w * bands;
    guint8 *pixels = g_malloc(line * h);
    for (int y = 0; y < h; y++) memcpy(pixels + line * y, plane + (size_t)stride * y, line);
    *out = vips_image_new_from_memory_copy(pixels, line * h, w, h, bands, VIPS_FORMAT_UCHAR);
    g_free(pixels);
    if (!*out) {
        r = -1;  // out of memory: libvips' error
        goto done;
    }
    (*out)->Type = VIPS_INTERPRETATION_sRGB;
    enum heif_color_profile_type profile = heif_image_handle_get_color_profile_type(primary);
    size_t length = heif_image_handle_get_raw_color_profile_size(primary);
    if ((profile == heif_color_profile_type_prof || profile == heif_color_profile_type_rICC) && length > 0) {
        void *icc = g_malloc(length);
        if (!heif_image_handle_get_raw_color_profile(primary, icc).code) vips_image_set_blob_copy(*out, VIPS_META_ICC_NAME, icc, length);
        g_free(icc);
    }
    r = 0;
done:
    if (decoded) heif_image_release(decoded);
    if (thumb) heif_image_handle_release(thumb);
    if (primary) heif_image_handle_release(primary);
    heif_context_free(context);
    return r;
}

int vs_preview_fd(int fd, int kind, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    VipsSource *source = shim_source_for_fd(fd, cancel);
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
    if (kind == VS_PREVIEW_HEIF && heif) {
        int direct = heif_thumbnail(fd, cancel, out);
        if (direct != 1) {
            g_object_unref(source);
            return direct;
        }
        result = vips_heifload_source(source, &loaded, "thumbnail", TRUE, NULL);
    }
    g_object_unref(source);
    if (result) return result;
    result = vips_autorot(loaded, out, NULL);
    g_object_unref(loaded);
    return result;
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
