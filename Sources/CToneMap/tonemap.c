// HDR to SDR (issue 31; docs/RENDERING.md, "HDR sources"; docs/DECISIONS.md, "HDR is tone
// mapped by viewerd's own curve on 16-bit RGB"). Per pixel: linearize (lookup tables built
// once), scale to the reference white, BT.2020 or P3 to BT.709, desaturate what is still out of
// gamut towards its luminance, roll the highlights off on the largest channel, encode sRGB.
#include <math.h>
#include <pthread.h>

#include "tonemap.h"

// --- Transfers (BT.2100) --------------------------------------------------------------------

// PQ's EOTF (SMPTE ST 2084): a signal in [0, 1] to nits.
static double pq_eotf(double e) {
    const double m1 = 2610.0 / 16384, m2 = 2523.0 / 4096 * 128, c1 = 3424.0 / 4096, c2 = 2413.0 / 4096 * 32,
                 c3 = 2392.0 / 4096 * 32;
    double p = pow(fmax(e, 0), 1 / m2);
    return 10000 * pow(fmax(p - c1, 0) / (c2 - c3 * p), 1 / m1);
}

// HLG's inverse OETF (ARIB STD-B67, BT.2100): a signal in [0, 1] to scene light in [0, 1].
static double hlg_inverse_oetf(double e) {
    const double a = 0.17883277, b = 1 - 4 * a, c = 0.5 - a * log(4 * a);
    return e <= 0.5 ? e * e / 3 : (exp((e - c) / a) + b) / 12;
}

// HLG's OOTF, channel by channel: display light = peak × E^γ, γ = 1.2 at 1,000 nits
// (BT.2100). BT.2100 raises the luminance instead (Ys^(γ-1) × E); applied channel by channel
// it is what zimg (FFmpeg's zscale) does and what an SDR camera's gamma does, and it gave
// 25.3 dB against the SDR picture of zscale's HLG test pattern where the luminance form gave
// 15.2 dB (docs/DECISIONS.md, "HDR is tone mapped by viewerd's own curve on 16-bit RGB").
static double hlg_display(double e) {
    const double gamma = 1.2 + 0.42 * log10(TM_NOMINAL_PEAK_NITS / 1000);
    return TM_NOMINAL_PEAK_NITS / TM_REFERENCE_WHITE_NITS * pow(hlg_inverse_oetf(e), gamma);
}

// The 16-bit signal of each transfer, linearized, over the reference white. The sRGB encoding of linear light in [0, 1], to 8 bits, in fine steps
// (1/16383: under half an 8-bit step even in the darkest codes).
enum { SRGB_STEPS = 16383 };
static float pq_table[65536], hlg_table[65536];
static uint8_t srgb_table[SRGB_STEPS + 1];
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;

static void build_tables(void) {
    for (int i = 0; i < 65536; i++) {
        pq_table[i] = (float)(pq_eotf(i / 65535.0) / TM_REFERENCE_WHITE_NITS);
        hlg_table[i] = (float)hlg_display(i / 65535.0);
    }
    for (int i = 0; i <= SRGB_STEPS; i++) {
        double x = (double)i / SRGB_STEPS;
        double v = x <= 0.0031308 ? 12.92 * x : 1.055 * pow(x, 1 / 2.4) - 0.055;
        srgb_table[i] = (uint8_t)lround(fmin(fmax(v, 0), 1) * 255);
    }
}

int tm_is_hdr_transfer(int transfer) { return transfer == TM_TRANSFER_PQ || transfer == TM_TRANSFER_HLG; }

// --- The tone curve ----------------------------------------------------------------------------

// The knee: light up to this fraction of the reference white is left as it is; above it the
// curve bends so that the source's peak lands on white. Chosen by measurement (DECISIONS.md):
// the lowest knee (the most room for highlights) within 1.5 dB of zscale's plain inverse on
// its own test patterns (640x360 and 1920x1080), where nothing is above the reference white.
#define TM_KNEE 0.80

// The Möbius curve (mpv's and FFmpeg's `tonemap=mobius`): the identity up to the knee `j`,
// then (x + a) / (x + b) scaled, continuous with a slope of 1 at the knee, rising without end
// and reaching 1 at `peak`. Nothing is clipped flat below the peak.
double tm_curve(double x, double peak) {
    const double j = TM_KNEE;
    if (peak <= 1) return fmin(x, 1);
    if (x <= j) return x;
    double a = -j * j * (peak - 1) / (j * j - 2 * j + peak);
    double b = (j * j - 2 * j * peak + peak) / (peak - 1);
    double scale = (b * b + 2 * b * j + j * j) / (b - a);
    return fmin(scale * (x + a) / (x + b), 1);
}

// --- Primaries ---------------------------------------------------------------------------------

// Linear RGB of each primaries to BT.709's (through XYZ, D65 white in both).
static const float bt2020_to_709[9] = {
    1.660491f, -0.587641f, -0.072850f, -0.124550f, 1.132900f, -0.008349f, -0.018151f, -0.100579f, 1.118730f,
};
static const float p3_to_709[9] = {
    1.224940f, -0.224940f, 0.000000f, -0.042057f, 1.042057f, 0.000000f, -0.019638f, -0.078636f, 1.098274f,
};
static const float identity[9] = {1, 0, 0, 0, 1, 0, 0, 0, 1};

// BT.709's luminance weights: what an out-of-gamut colour is desaturated towards.
static const float bt709_luma[3] = {0.2126f, 0.7152f, 0.0722f};

static uint8_t encode(float v) {
    int i = (int)(v * SRGB_STEPS + 0.5f);
    return srgb_table[i < 0 ? 0 : i > SRGB_STEPS ? SRGB_STEPS : i];
}

int tm_to_srgb8(int transfer, int primaries, double peak_nits, const uint16_t *in, size_t in_stride, uint8_t *out,
                size_t out_stride, int width, int height, int channels) {
    if (!tm_is_hdr_transfer(transfer) || (channels != 3 && channels != 4)) return -1;
    pthread_once(&tables_once, build_tables);
    const float *matrix = primaries == TM_PRIMARIES_BT709 ? identity : primaries == TM_PRIMARIES_P3 ? p3_to_709 : bt2020_to_709;
    const int hlg = transfer == TM_TRANSFER_HLG;
    double peak = hlg || peak_nits <= 0 ? TM_NOMINAL_PEAK_NITS : fmin(fmax(peak_nits, TM_REFERENCE_WHITE_NITS), 10000);
    const float *table = hlg ? hlg_table : pq_table;
    // The brightest the pixels really are, in case the stream's metadata says less (it is
    // often wrong, and a hostile file's may say anything): the curve then reaches white at the
    // picture's own peak, so nothing above the stated one is clipped flat. One pass at the
    // output's size, which is what is tone mapped.
    float brightest = 0;
    for (int y = 0; y < height; y++) {
        const uint16_t *s = in + (size_t)y * in_stride;
        for (int x = 0; x < width; x++, s += channels) {
            float r = table[s[0]], g = table[s[1]], b = table[s[2]];
            for (int row = 0; row < 3; row++)
                brightest = fmaxf(brightest, matrix[3 * row] * r + matrix[3 * row + 1] * g + matrix[3 * row + 2] * b);
        }
    }
    peak = fmin(fmax(peak, (double)brightest * TM_REFERENCE_WHITE_NITS), 10000);
    const float relative_peak = (float)(peak / TM_REFERENCE_WHITE_NITS);

    // The curve on the largest channel, as a table over [0, peak] (applied as a ratio, so the
    // channels keep their proportions: no hue shift from the roll-off).
    enum { CURVE_STEPS = 4096 };
    float curve[CURVE_STEPS + 2];
    for (int i = 0; i <= CURVE_STEPS + 1; i++) curve[i] = (float)tm_curve((double)i / CURVE_STEPS * relative_peak, relative_peak);
    const float curve_index = CURVE_STEPS / relative_peak;

    for (int y = 0; y < height; y++) {
        const uint16_t *s = in + (size_t)y * in_stride;
        uint8_t *d = out + (size_t)y * out_stride;
        for (int x = 0; x < width; x++, s += channels, d += channels) {
            float r = table[s[0]], g = table[s[1]], b = table[s[2]];
            float lr = matrix[0] * r + matrix[1] * g + matrix[2] * b;
            float lg = matrix[3] * r + matrix[4] * g + matrix[5] * b;
            float lb = matrix[6] * r + matrix[7] * g + matrix[8] * b;
            // Out of BT.709's gamut: towards the colour's own luminance until no channel is
            // negative (the hue stays; a channel-wise clip would turn it).
            float lowest = fminf(lr, fminf(lg, lb));
            if (lowest < 0) {
                float luma = fmaxf(bt709_luma[0] * lr + bt709_luma[1] * lg + bt709_luma[2] * lb, 0);
                float t = luma / (luma - lowest);
                lr = luma + t * (lr - luma), lg = luma + t * (lg - luma), lb = luma + t * (lb - luma);
            }
            float highest = fmaxf(lr, fmaxf(lg, lb));
            if (highest > TM_KNEE) {
                float position = highest * curve_index;
                int i = (int)position;
                float mapped = i >= CURVE_STEPS ? 1 : curve[i] + (curve[i + 1] - curve[i]) * (position - i);
                float ratio = mapped / highest;
                lr *= ratio, lg *= ratio, lb *= ratio;
            }
            d[0] = encode(lr), d[1] = encode(lg), d[2] = encode(lb);
            if (channels == 4) d[3] = (uint8_t)((s[3] * 255u + 32767u) / 65535u);
        }
    }
    return 0;
}
