// A progressive JPEG decoded at 1/8 from only the scans that scale reads. See
// include/vips_shim.h (vs_jpeg_dc_load_fd) and docs/DECISIONS.md.
//
// At scale 1/8 libjpeg inverse-transforms a component whose DCT scaling it sets to 1 with
// the 1x1 IDCT, which reads the block's DC coefficient and nothing else. A progressive file
// sends each coefficient band in its own scans, so the scans that carry only AC bands of
// such components cannot change a pixel of that decode: they are dropped before libjpeg sees
// the stream, and it Huffman-decodes the DC scans alone (a tenth of a camera file's bytes).
// Components libjpeg scales up by IDCT instead (the chroma of 4:2:0 gets the 2x2 IDCT, which
// reads AC coefficients up to the 7th) keep every scan.
#include "vips_shim.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vips/vips.h>
#include <jpeglib.h>

// Larger files are left to libvips (a camera JPEG is under 50 MiB).
#define DC_MAX_FILE_BYTES ((off_t)256 << 20)
// Rows decoded between two looks at the cancel request.
#define DC_ROWS_PER_CHECK 16

typedef struct {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
} dc_error;

// Any libjpeg error ends the attempt; the caller falls back to libvips' own decode.
static void dc_error_exit(j_common_ptr cinfo) { longjmp(((dc_error *)cinfo->err)->jump, 1); }

// Messages are not printed: a warning (corrupt data, a truncated file) is counted in
// num_warnings and makes the attempt give up, so libvips decides what such a file gives.
static void dc_output_message(j_common_ptr cinfo) { (void)cinfo; }

// Everything one attempt owns, freed by dc_state_free whichever way it ends (longjmp included:
// the state lives outside the frame that setjmp saves).
typedef struct {
    struct jpeg_decompress_struct cinfo;
    dc_error err;
    int cinfo_ready;
    uint8_t *file;
    uint8_t *kept;
    uint8_t *pixels;
    uint8_t *line;
    JOCTET *icc;
    unsigned int icc_length;
} dc_state;

static void dc_state_free(dc_state *s) {
    if (s->cinfo_ready) jpeg_destroy_decompress(&s->cinfo);
    g_free(s->file);
    g_free(s->kept);
    g_free(s->pixels);
    g_free(s->line);
    free(s->icc);  // jpeg_read_icc_profile allocates with malloc
}

static int cancelled(const vs_cancel *cancel) { return cancel && vs_cancel_requested(cancel); }

// The whole file, read with pread from offset 0: the descriptor's own offset is shared with
// other readers and is neither used nor moved.
static uint8_t *read_all(int fd, size_t *length, const vs_cancel *cancel) {
    struct stat st;
    if (fstat(fd, &st) || st.st_size < 4 || st.st_size > DC_MAX_FILE_BYTES) return NULL;
    size_t size = (size_t)st.st_size, done = 0;
    uint8_t *data = g_try_malloc(size);
    if (!data) return NULL;
    while (done < size && !cancelled(cancel)) {
        ssize_t n = pread(fd, data + done, size - done, (off_t)done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    if (done < size) {
        g_free(data);
        return NULL;
    }
    *length = size;
    return data;
}

// Where the entropy-coded data that starts at `p` ends: at the first marker other than a
// stuffed zero or a restart marker.
static size_t entropy_end(const uint8_t *data, size_t p, size_t length) {
    while (p + 1 < length) {
        const uint8_t *ff = memchr(data + p, 0xFF, length - p - 1);
        if (!ff) return length;
        p = (size_t)(ff - data);
        uint8_t next = data[p + 1];
        if (next == 0x00 || (next >= 0xD0 && next <= 0xD7)) p += 2;
        else return p;
    }
    return length;
}

// Copies the stream without the scans that add nothing to a 1/8 decode: those whose only
// component has `dc_only` set and whose band starts after the DC. Returns the new length, or
// 0 when the stream is not a well-formed progressive file ending in EOI, or when no scan
// would be dropped (nothing to gain over libvips' own decode).
static size_t keep_needed_scans(const uint8_t *data, size_t length, const int *component_ids,
                                const int *dc_only, int components, uint8_t *kept) {
    if (length < 4 || data[0] != 0xFF || data[1] != 0xD8) return 0;
    memcpy(kept, data, 2);
    size_t p = 2, out = 2;
    int dropped = 0;
    for (;;) {
        while (p < length && data[p] == 0xFF && p + 1 < length && data[p + 1] == 0xFF) p++;  // fill bytes
        if (p + 1 >= length || data[p] != 0xFF) return 0;
        uint8_t marker = data[p + 1];
        if (marker == 0xD9) {
            memcpy(kept + out, data + p, 2);
            out += 2;
            return dropped ? out : 0;
        }
        // Standalone markers (TEM, RSTn) do not belong between segments.
        if (marker == 0x01 || (marker >= 0xD0 && marker <= 0xD8) || p + 4 > length) return 0;
        size_t segment = ((size_t)data[p + 2] << 8 | data[p + 3]) + 2;
        if (segment < 4 || p + segment > length) return 0;
        size_t end = p + segment;
        int keep = 1;
        if (marker == 0xDA) {
            int ns = data[p + 4];
            if (ns < 1 || segment < (size_t)(8 + 2 * ns)) return 0;
            int ss = data[p + 5 + 2 * ns];
            // A scan of one component's AC band: needless when that component is DC-only.
            if (ns == 1 && ss > 0) {
                for (int c = 0; c < components; c++)
                    if (component_ids[c] == data[p + 5] && dc_only[c]) keep = 0;
            }
            end = entropy_end(data, end, length);
        }
        if (keep) {
            memcpy(kept + out, data + p, end - p);
            out += end - p;
        } else {
            dropped++;
        }
        p = end;
    }
}

int vs_jpeg_dc_load_fd(int fd, int orientation, double xres, double yres, vs_cancel *cancel, VipsImage **out) {
    *out = NULL;
    dc_state *s = g_new0(dc_state, 1);
    size_t length = 0;
    volatile int result = -2;
    if (!(s->file = read_all(fd, &length, cancel))) goto done;

    s->cinfo.err = jpeg_std_error(&s->err.pub);
    s->err.pub.error_exit = dc_error_exit;
    s->err.pub.output_message = dc_output_message;
    if (setjmp(s->err.jump)) goto done;
    jpeg_create_decompress(&s->cinfo);
    s->cinfo_ready = 1;

    // First the header of the whole file: which components libjpeg decodes with the 1x1 IDCT
    // at 1/8, and the ICC profile (libvips attaches it; colour management needs it).
    jpeg_save_markers(&s->cinfo, JPEG_APP0 + 2, 0xFFFF);
    jpeg_mem_src(&s->cinfo, s->file, length);
    jpeg_read_header(&s->cinfo, TRUE);
    int components = s->cinfo.num_components;
    // Grey and YCbCr/RGB only, as libvips decodes them (to 1 or 3 bands); CMYK and YCCK,
    // arithmetic coding and baseline files take libvips' path.
    if (!s->cinfo.progressive_mode || s->cinfo.arith_code ||
        !((components == 1 && s->cinfo.out_color_space == JCS_GRAYSCALE) ||
          (components == 3 && s->cinfo.out_color_space == JCS_RGB)))
        goto done;
    s->cinfo.scale_num = 1;
    s->cinfo.scale_denom = 8;
    jpeg_calc_output_dimensions(&s->cinfo);
    int ids[3], dc_only[3];
    for (int c = 0; c < components; c++) {
        ids[c] = s->cinfo.comp_info[c].component_id;
        dc_only[c] = s->cinfo.comp_info[c].DCT_scaled_size == 1;
    }
    if (!jpeg_read_icc_profile(&s->cinfo, &s->icc, &s->icc_length)) s->icc = NULL;
    jpeg_abort_decompress(&s->cinfo);

    s->kept = g_try_malloc(length);
    size_t kept_length = s->kept ? keep_needed_scans(s->file, length, ids, dc_only, components, s->kept) : 0;
    g_clear_pointer(&s->file, g_free);  // the decode's coefficients need the memory more
    if (!kept_length) goto done;

    // Buffered-image mode: input is consumed in steps, so a cancel is seen between them.
    jpeg_mem_src(&s->cinfo, s->kept, kept_length);
    jpeg_read_header(&s->cinfo, TRUE);
    s->cinfo.scale_num = 1;
    s->cinfo.scale_denom = 8;
    // A full decode never smooths (every coefficient is final by then); with the AC scans
    // gone, libjpeg would estimate AC values that a 1x1 IDCT ignores anyway.
    s->cinfo.do_block_smoothing = FALSE;
    s->cinfo.buffered_image = TRUE;
    jpeg_start_decompress(&s->cinfo);
    for (;;) {
        if (cancelled(cancel)) goto done;
        int status = jpeg_consume_input(&s->cinfo);
        if (status == JPEG_REACHED_EOI) break;
        if (status == JPEG_SUSPENDED) goto done;
    }
    // libvips' loader drops the partial block at the right and bottom edges (it makes
    // floor(side / 8), libjpeg ceil): the same rows and columns are kept here.
    int width = (int)(s->cinfo.image_width / 8), height = (int)(s->cinfo.image_height / 8);
    int bands = s->cinfo.output_components;
    if (width < 1 || height < 1) goto done;
    size_t row = (size_t)width * bands;
    if (!(s->pixels = g_try_malloc(row * height)) ||
        !(s->line = g_try_malloc((size_t)s->cinfo.output_width * bands)))
        goto done;
    jpeg_start_output(&s->cinfo, s->cinfo.input_scan_number);
    while (s->cinfo.output_scanline < (JDIMENSION)height) {
        if (s->cinfo.output_scanline % DC_ROWS_PER_CHECK == 0 && cancelled(cancel)) goto done;
        size_t y = s->cinfo.output_scanline;
        JSAMPROW line = s->line;
        jpeg_read_scanlines(&s->cinfo, &line, 1);
        memcpy(s->pixels + row * y, s->line, row);
    }
    jpeg_finish_output(&s->cinfo);
    if (s->err.pub.num_warnings > 0) goto done;

    VipsImage *memory = vips_image_new_from_memory_copy(s->pixels, row * height, width, height, bands,
                                                        VIPS_FORMAT_UCHAR);
    if (!memory) goto done;
    if (vips_copy(memory, out, "interpretation", bands == 1 ? VIPS_INTERPRETATION_B_W : VIPS_INTERPRETATION_sRGB,
                  NULL)) {
        g_object_unref(memory);
        goto done;
    }
    g_object_unref(memory);
    vips_image_set_int(*out, VIPS_META_ORIENTATION, orientation);
    if (s->icc) vips_image_set_blob_copy(*out, VIPS_META_ICC_NAME, s->icc, s->icc_length);
    // The resolution libvips' loader gives the file (its header's), which the thumbnail keeps.
    (*out)->Xres = xres;
    (*out)->Yres = yres;
    result = 0;
done:
    dc_state_free(s);
    g_free(s);
    return result;
}
