// What a rendition's pixels go through between the resize and the save (IIIF's order after
// its size): mirrored, turned, recoloured. Only a request that asks for one pays for it: the
// default vs_transform leaves the image (and direct_save.c's fast path) untouched.
#include "shim_private.h"

// Replaces *image by `next` when `status` (a libvips call's) is 0; leaves it otherwise.
static int replace(VipsImage **image, VipsImage *next, int status) {
    if (status) return -1;
    g_object_unref(*image);
    *image = next;
    return 0;
}

// Any angle but a quarter turn: the bounding box grows, and the corners it opens are
// transparent (save.c flattens them onto the background for a format without alpha).
// Interpolated premultiplied, so an edge fades to transparent and not through black.
static int rotate_any(VipsImage **image, double angle) {
    VipsImage *t = NULL;
    if (!vips_image_hasalpha(*image)) {
        int r = vips_bandjoin_const1(*image, &t, 255.0, NULL);
        if (replace(image, t, r)) return -1;
    }
    VipsImage *premultiplied = NULL, *rotated = NULL, *straight = NULL, *cast = NULL;
    double clear[4] = {0, 0, 0, 0};
    VipsArrayDouble *background = vips_array_double_new(clear, 4);
    int r = vips_premultiply(*image, &premultiplied, NULL);
    if (!r) r = vips_rotate(premultiplied, &rotated, angle, "background", background, NULL);
    if (!r) r = vips_unpremultiply(rotated, &straight, NULL);
    if (!r) r = vips_cast_uchar(straight, &cast, NULL);
    vips_area_unref(VIPS_AREA(background));
    if (premultiplied) g_object_unref(premultiplied);
    if (rotated) g_object_unref(rotated);
    if (straight) g_object_unref(straight);
    if (r) return -1;
    t = NULL;
    r = vips_copy(cast, &t, "interpretation", VIPS_INTERPRETATION_sRGB, NULL);
    g_object_unref(cast);
    return replace(image, t, r);
}

int shim_turn(VipsImage **image, const vs_transform *transform) {
    VipsImage *original = *image, *t = NULL;
    g_object_ref(original);
    int r = 0;
    if (transform->mirror) {
        r = vips_flip(*image, &t, VIPS_DIRECTION_HORIZONTAL, NULL);
        r = replace(image, t, r);
    }
    int rotation = transform->rotation;
    if (!r && rotation != 0) {
        // A turn reads its input out of order, and the loader may read the file top to bottom
        // only (a PNG, a JPEG at its own size: "out of order read" past libvips' read-ahead):
        // the pixels at the rendition's size, already made, are held in memory first.
        VipsImage *held = vips_image_copy_memory(*image);
        r = replace(image, held, held ? 0 : -1);
    }
    if (!r && rotation % 90 == 0 && rotation != 0) {
        VipsAngle angle = rotation == 90 ? VIPS_ANGLE_D90 : rotation == 180 ? VIPS_ANGLE_D180 : VIPS_ANGLE_D270;
        t = NULL;
        r = vips_rot(*image, &t, angle, NULL);
        r = replace(image, t, r);
    } else if (!r && rotation != 0) {
        r = rotate_any(image, rotation);
    }
    if (r) {
        // Left as it was: what the caller gave, not a half-turned image.
        g_object_unref(*image);
        *image = original;
        return -1;
    }
    g_object_unref(original);
    return 0;
}

int shim_recolour(VipsImage **image, int colour) {
    if (colour == VS_COLOUR_COLOUR) return 0;
    if (colour != VS_COLOUR_GRAY && colour != VS_COLOUR_BITONAL) {
        vips_error("viewerd", "unknown colour mode %d", colour);
        return -1;
    }
    // libvips' B_W: the luminance of the linear light, 0.2 R + 0.7 G + 0.1 B, sRGB-encoded; alpha carried.
    VipsImage *gray = NULL, *cast = NULL;
    if (vips_colourspace(*image, &gray, VIPS_INTERPRETATION_B_W, NULL)) return -1;
    int r = vips_cast_uchar(gray, &cast, NULL);
    g_object_unref(gray);
    if (r) return -1;
    if (colour == VS_COLOUR_GRAY) return replace(image, cast, 0);
    // Bitonal: the gray band at mid-grey, 128 and up white; alpha as it is.
    VipsImage *luminance = NULL, *threshold = NULL, *joined = NULL, *out = NULL;
    int alpha = vips_image_get_bands(cast) > 1;
    r = vips_extract_band(cast, &luminance, 0, NULL);
    if (!r) r = vips_moreeq_const1(luminance, &threshold, 128.0, NULL);
    if (!r && alpha) {
        VipsImage *alphaBand = NULL;
        r = vips_extract_band(cast, &alphaBand, 1, NULL);
        if (!r) {
            r = vips_bandjoin2(threshold, alphaBand, &joined, NULL);
            g_object_unref(alphaBand);
        }
    }
    if (!r) r = vips_copy(joined ? joined : threshold, &out, "interpretation", VIPS_INTERPRETATION_B_W, NULL);
    g_object_unref(cast);
    if (luminance) g_object_unref(luminance);
    if (threshold) g_object_unref(threshold);
    if (joined) g_object_unref(joined);
    if (r) return -1;
    return replace(image, out, 0);
}
