// A source's header, read without decoding pixels (vs_header_fd), with a copy of its ICC profile.
#include "shim_private.h"

#include <string.h>

int vs_header_fd(int fd, vs_header *out) {
    memset(out, 0, sizeof(*out));
    VipsSource *source = shim_source_for_fd(fd, NULL);
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
    // jp2kload's "pages" are a JPEG 2000's resolution levels (page n: 1/2^n the size), not pictures.
    if (vips_isprefix("VipsForeignLoadJp2k", loader)) out->pages = 1;
    out->bits = (int)vips_format_sizeof(vips_image_get_format(image)) * 8;
    out->orientation = vips_image_get_orientation(image);
    int interlaced = 0;
    if (vips_image_get_typeof(image, "interlaced") && !vips_image_get_int(image, "interlaced", &interlaced))
        out->interlaced = interlaced;
    out->has_icc = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
    const void *icc = NULL;
    size_t icc_length = 0;
    // A copy: the image goes before the caller reads it (Swift decides whether it is sRGB).
    if (out->has_icc && !vips_image_get_blob(image, VIPS_META_ICC_NAME, &icc, &icc_length) && icc_length > 0) {
        out->icc = g_malloc(icc_length);
        memcpy(out->icc, icc, icc_length);
        out->icc_length = icc_length;
    }
    out->cmyk = vips_image_get_interpretation(image) == VIPS_INTERPRETATION_CMYK;
    out->xres = image->Xres;
    out->yres = image->Yres;
    // find_load_source gives the class name; report the nickname people know ("jpegload_source").
    const char *nickname = vips_nickname_find(g_type_from_name(loader));
    g_strlcpy(out->loader, nickname ? nickname : loader, sizeof(out->loader));
    g_object_unref(image);
    return 0;
}
