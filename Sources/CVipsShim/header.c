// A source's header, read without decoding pixels (vs_header_fd), and whether its ICC profile is sRGB.
#include "shim_private.h"

#include <string.h>

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
