// Cheap degraded previews: a JPEG's EXIF thumbnail, a HEIF's thumbnail item (vs_preview_fd).
#include "shim_private.h"

#include <string.h>

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
    if (kind == VS_PREVIEW_HEIF && heif) result = vips_heifload_source(source, &loaded, "thumbnail", TRUE, NULL);
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
