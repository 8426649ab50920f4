// The test fixtures' libvips calls (RenderingFixtures): a file written from pixels, an image
// decoded to pixels. Test-only: no product links this target (MakeInstallTests checks).
#ifndef VIEWERD_VIPS_FIXTURES_H
#define VIEWERD_VIPS_FIXTURES_H

#include <stddef.h>
#include <stdint.h>

/// Writes 8-bit pixels (bands 1-4, packed rows) to a file whose suffix picks the format.
/// For tests and fixtures. orientation > 1 is written as EXIF orientation (JPEG).
/// pages > 1 splits the height into that many pages or frames (GIF, WebP, TIFF).
/// `options` are saver options in libvips' string form, e.g. "interlace" or "palette,Q=90".
int vs_write_pixels(const char *path, const uint8_t *pixels, int width, int height, int bands,
                    int orientation, int pages, const char *options);

/// Decodes a whole image from memory into 8-bit pixels (for tests): *pixels is g_malloc'd.
int vs_decode_buffer(const void *buf, size_t len, uint8_t **pixels, int *width, int *height,
                     int *bands);

/// libvips' own jpegsave_buffer of 8-bit pixels (bands 1-4, packed rows; alpha flattened onto
/// `background`, 0xRRGGBB) with Q `quality`, `optimize_coding`, strip, no interlace: what a
/// JPEG rendition must equal byte for byte. *buf is g_malloc'd.
int vs_fixture_jpegsave(const uint8_t *pixels, int width, int height, int bands, int quality, int optimize_coding,
                        uint32_t background, void **buf, size_t *len);

typedef struct _VipsImage VipsImage;

/// A lazy 3-band sRGB image whose pixels are computed on demand, counting the strips a thread
/// other than the caller's computes (vs_fixture_strips_generated_elsewhere). One at a time.
int vs_fixture_recording_image(int width, int height, VipsImage **out);
int vs_fixture_strips_generated_elsewhere(void);

#endif
