#ifndef VIEWERD_TONEMAP_H
#define VIEWERD_TONEMAP_H

#include <stddef.h>
#include <stdint.h>

// HDR to SDR (issue 31): PQ and HLG pixels, in BT.2020 (or P3, or BT.709) primaries, to 8-bit
// sRGB. A library-free C target so that both the still path (libvips) and the video path
// (FFmpeg) hand it the same 16-bit RGB and get the same picture back (docs/RENDERING.md, "HDR
// sources").

/// The transfers, as ITU-T H.273 numbers them (an HEIF nclx box and FFmpeg's AVColorTransferCharacteristic agree).
enum { TM_TRANSFER_PQ = 16, TM_TRANSFER_HLG = 18 };
/// The primaries, as H.273 numbers them.
enum { TM_PRIMARIES_BT709 = 1, TM_PRIMARIES_BT2020 = 9, TM_PRIMARIES_P3 = 12 };

/// The luminance, in nits, that becomes SDR white (1.0): HDR test patterns are made at a
/// 100-nit reference white (zscale's `npl=100`), and so is what they stand for.
#define TM_REFERENCE_WHITE_NITS 100.0
/// The display peak an HLG signal is shown at (its OOTF's nominal peak, BT.2100), and the
/// peak a PQ source is assumed to reach when its metadata does not say.
#define TM_NOMINAL_PEAK_NITS 1000.0

/// 1 when `transfer` (H.273) is one this file tone maps.
int tm_is_hdr_transfer(int transfer);

/// Converts `height` rows of `width` pixels of 16-bit RGB (or RGBA: `channels` 3 or 4), full
/// range, in the source's `transfer` and `primaries`, to 8-bit sRGB with the same channels
/// (alpha scaled). `peak_nits`: the source's brightest (content light level or mastering
/// display), 0 when unknown. Strides are in elements (uint16_t in, uint8_t out). The light is
/// linearized (PQ's EOTF; HLG's inverse OETF and OOTF at 1,000 nits), scaled so the reference
/// white is 1, converted to BT.709 primaries with out-of-gamut colours desaturated towards
/// their luminance (hue kept), highlights rolled off by the tone curve on the largest channel
/// (hue kept), and sRGB-encoded. Returns 0, or -1 for a transfer or channel count it does not
/// handle.
int tm_to_srgb8(int transfer, int primaries, double peak_nits, const uint16_t *in, size_t in_stride, uint8_t *out,
                size_t out_stride, int width, int height, int channels);

/// The tone curve alone, on linear light relative to the reference white, for a source whose
/// brightest is `peak` (relative): the identity below the knee, rising to 1 at `peak`.
double tm_curve(double x, double peak);

#endif
