// Poster frames and media info of videos with FFmpeg's libraries (issue 17).
//
// Everything reads the descriptor the daemon opened, through a custom AVIOContext over
// pread (the worker never opens a path), only the demuxers and decoders listed below run,
// and every loop is bounded: by the render's cancel flag (the interrupt callback and the
// reads), by a packet budget per attempt, and by the decoder's pixel limit. The frame is
// converted to 8-bit RGB in memory, at the size the caller's target gives, with the orientation
// the container's display matrix asks for; Rendering hands it to libvips, which crops, turns
// and encodes it as it does a photo (docs/RENDERING.md, "Videos"). Nothing here knows libvips.
#include <errno.h>
#include <stdarg.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/display.h>
#include <libavutil/imgutils.h>
#include <libavutil/mastering_display_metadata.h>
#include <libavutil/pixdesc.h>
#include <libswscale/swscale.h>

#include "ffmpeg_shim.h"
#include "tonemap.h"

// The demuxers a video may go through: ISO media (MP4, MOV, 3GP), Matroska and WebM, AVI,
// MPEG transport and program streams. Everything else FFmpeg has (hundreds of formats, some
// of them network protocols in disguise, like HLS playlists) never sees a byte.
static const char *const allowed_demuxers = "mov,mp4,m4a,3gp,3g2,mj2,matroska,webm,avi,mpegts,mpeg";

// The video decoders: the codecs phones, cameras and the web write. Others are refused
// as `unsupported-format` before a decoder is opened.
static const char *const allowed_decoders[] = {
    "h264", "hevc", "vp8", "vp9", "libdav1d", "av1", "libaom-av1", "mpeg4", "mpeg2video", "mpeg1video",
    "mjpeg", "prores", "h263", "msmpeg4", "msmpeg4v2", "msmpeg4v1", "theora", "dvvideo", NULL,
};

// How many packets one attempt may read before it gives up: enough to reach a frame behind
// a long group of pictures, few enough that a file that makes the demuxer loop costs
// milliseconds, not the job timeout.
#define VV_PACKET_BUDGET 4000

// Representative frames are tried at these fractions of the duration, until one is not
// near-uniform (a black or white frame, a fade): 10 % first, as thumbnailers do.
static const double representative_fractions[] = {0.10, 0.25, 0.40, 0.55, 0.70, 0.85};

// The last error FFmpeg logged on this thread (e.g. "moov atom not found"), so a failure
// says what FFmpeg saw; FFmpeg's own logging to standard error is off.
static _Thread_local char last_log[256];

static void log_callback(void *avcl, int level, const char *format, va_list args) {
    (void)avcl;
    if (level > AV_LOG_ERROR) return;
    char line[256];
    vsnprintf(line, sizeof line, format, args);
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '.')) line[--n] = 0;
    if (n > 0) snprintf(last_log, sizeof last_log, "%s", line);
}

// The largest single allocation FFmpeg may make in this process. Its demuxers size some
// tables by what a header claims, not by the bytes behind it: the mov demuxer fills a 24-byte
// index entry for every sample the sample tables claim (12.7 KB claiming 85 million samples
// took 2 GB and 13 s, review #3 of issue 29), where FFmpeg's own cap is 2 GiB. 256 MiB holds
// what a real file needs: an 8192x8192 frame's 16-bit planes (128 MiB each, the largest frame
// decoded), and the index of 11 million samples (a day of 120 fps video). Past it the
// allocation fails and FFmpeg reports the file damaged (or drops the index: see video_open).
#define VV_MAX_ALLOC ((size_t)256 << 20)

// The memory a demuxer may spend on the index it builds while reading (AVFMT_GENERIC_INDEX:
// transport and program streams), FFmpeg's own default, stated here because it is a bound.
#define VV_MAX_INDEX_SIZE (1 << 20)

void vv_init(void) {
    av_log_set_callback(log_callback);
    av_max_alloc(VV_MAX_ALLOC);
}

static int fail(char *err, size_t errlen, int code, const char *format, ...) __attribute__((format(printf, 4, 5)));
static int fail(char *err, size_t errlen, int code, const char *format, ...) {
    va_list args;
    va_start(args, format);
    vsnprintf(err, errlen, format, args);
    va_end(args);
    return code;
}

static void describe(int av_error, char *out, size_t length) {
    if (last_log[0]) snprintf(out, length, "%s", last_log);
    else av_strerror(av_error, out, length);
}

// --- Reading the descriptor ----------------------------------------------------------------

typedef struct {
    int fd;
    int64_t position;
    int64_t size;
    const vv_cancel *cancel;
} vv_reader;

static int cancelled(const vv_cancel *cancel) { return cancel && cancel->requested(cancel->context); }

static int reader_read(void *opaque, uint8_t *buffer, int length) {
    vv_reader *reader = opaque;
    if (cancelled(reader->cancel)) return AVERROR_EXIT;
    ssize_t n;
    do n = pread(reader->fd, buffer, (size_t)length, reader->position); while (n < 0 && errno == EINTR);
    if (n < 0) return AVERROR(errno);
    if (n == 0) return AVERROR_EOF;
    reader->position += n;
    return (int)n;
}

static int64_t reader_seek(void *opaque, int64_t offset, int whence) {
    vv_reader *reader = opaque;
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) return reader->size;
    int64_t target;
    switch (whence) {
    case SEEK_SET: target = offset; break;
    case SEEK_CUR: target = reader->position + offset; break;
    case SEEK_END: target = reader->size + offset; break;
    default: return AVERROR(EINVAL);
    }
    if (target < 0) return AVERROR(EINVAL);
    reader->position = target;
    return target;
}

static int interrupted(void *opaque) {
    vv_reader *reader = opaque;
    return cancelled(reader->cancel);
}

// --- Opening: container, stream, decoder ---------------------------------------------------

typedef struct {
    vv_reader reader;
    AVFormatContext *format;
    AVIOContext *io;
    AVStream *stream;
    const AVCodec *decoder;
    vv_info info;
} vv_video;

static void video_close(vv_video *video) {
    if (video->format) avformat_close_input(&video->format);
    if (video->io) {
        av_freep(&video->io->buffer);
        avio_context_free(&video->io);
    }
}

static int decoder_allowed(const AVCodec *decoder) {
    for (const char *const *name = allowed_decoders; *name; name++)
        if (strcmp(decoder->name, *name) == 0) return 1;
    return 0;
}

// The EXIF orientation (1-8) that turns a frame upright the way the display matrix says.
static int orientation_of(const AVStream *stream) {
    size_t size = 0;
    const uint8_t *matrix = av_stream_get_side_data(stream, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (!matrix || size < 9 * sizeof(int32_t)) return 1;
    const int32_t *m = (const int32_t *)matrix;
    double angle = av_display_rotation_get(m);  // counterclockwise degrees
    if (isnan(angle)) return 1;
    // The clockwise turn to apply, to the nearest quarter.
    int clockwise = ((int)lround(-angle / 90.0) % 4 + 4) % 4;
    // A negative determinant: the picture is also mirrored (horizontally, before turning).
    int mirrored = ((int64_t)m[0] * m[4] - (int64_t)m[1] * m[3]) < 0;
    // A mirror also turns the first row, which the angle is read from, by a half turn.
    if (mirrored) clockwise = (clockwise + 2) % 4;
    static const int plain[4] = {1, 6, 3, 8}, flipped[4] = {2, 7, 4, 5};
    return mirrored ? flipped[clockwise] : plain[clockwise];
}

// The index of the container's video stream (its default one when it marks one), cover art
// (an attached picture) excepted; -1 when it has none.
static int video_stream(const AVFormatContext *format) {
    int best = -1;
    for (unsigned i = 0; i < format->nb_streams; i++) {
        const AVStream *s = format->streams[i];
        if (s->codecpar->codec_type != AVMEDIA_TYPE_VIDEO || (s->disposition & AV_DISPOSITION_ATTACHED_PIC)) continue;
        if (best < 0) best = (int)i;
        if (s->disposition & AV_DISPOSITION_DEFAULT) return (int)i;
    }
    return best;
}

// The brightest an HDR stream says it gets, in nits: its content light level (MaxCLL), else
// its mastering display's peak; 0 when it says neither.
static int light_peak(const uint8_t *light_level, const uint8_t *mastering) {
    const AVContentLightMetadata *cll = (const AVContentLightMetadata *)light_level;
    if (cll && cll->MaxCLL > 0) return (int)cll->MaxCLL;
    const AVMasteringDisplayMetadata *display = (const AVMasteringDisplayMetadata *)mastering;
    if (display && display->has_luminance && display->max_luminance.den > 0)
        return (int)lround(av_q2d(display->max_luminance));
    return 0;
}

// Opens the descriptor's container and picks its video stream. 0, or -1 corrupt, -2 not a
// video viewerd decodes, -3 larger than max_pixels, -4 cancelled; `err` says why.
static int video_open(vv_video *video, int fd, int64_t max_pixels, const vv_cancel *cancel, char *err, size_t errlen) {
    memset(video, 0, sizeof *video);
    last_log[0] = 0;
    struct stat st;
    if (fstat(fd, &st) != 0) return fail(err, errlen, -1, "cannot read the file: %s", strerror(errno));
    if (st.st_size == 0) return fail(err, errlen, -2, "the file is empty");
    video->reader = (vv_reader){.fd = fd, .position = 0, .size = st.st_size, .cancel = cancel};

    enum { buffer_size = 64 * 1024 };
    uint8_t *buffer = av_malloc(buffer_size);
    if (!buffer) return fail(err, errlen, -1, "out of memory");
    video->io = avio_alloc_context(buffer, buffer_size, 0, &video->reader, reader_read, NULL, reader_seek);
    if (!video->io) {
        av_free(buffer);
        return fail(err, errlen, -1, "out of memory");
    }
    video->format = avformat_alloc_context();
    if (!video->format) return fail(err, errlen, -1, "out of memory");
    video->format->pb = video->io;
    video->format->flags |= AVFMT_FLAG_CUSTOM_IO;
    video->format->interrupt_callback = (AVIOInterruptCB){interrupted, &video->reader};
    video->format->format_whitelist = av_strdup(allowed_demuxers);
    video->format->protocol_whitelist = av_strdup("none");
    // The decoders find_stream_info may open (it decodes a few frames of every stream) are
    // those of the list too: an audio track's or a data stream's decoder never runs.
    char decoders[256] = "";
    for (const char *const *name = allowed_decoders; *name; name++) {
        if (decoders[0]) strncat(decoders, ",", sizeof decoders - strlen(decoders) - 1);
        strncat(decoders, *name, sizeof decoders - strlen(decoders) - 1);
    }
    video->format->codec_whitelist = av_strdup(decoders);
    video->format->max_index_size = VV_MAX_INDEX_SIZE;

    int status = avformat_open_input(&video->format, NULL, NULL, NULL);
    if (status < 0) {
        // avformat_open_input freed the context; the I/O context is ours.
        video->format = NULL;
        if (interrupted(&video->reader)) return fail(err, errlen, -4, "cancelled");
        char why[200];
        describe(status, why, sizeof why);
        if (status == AVERROR_INVALIDDATA && !last_log[0])
            return fail(err, errlen, -2, "not a video container viewerd reads");
        return fail(err, errlen, -1, "the container cannot be read: %s", why);
    }

    // Program streams have no header (their streams are found by reading packets);
    // transport streams and some AVIs say little in theirs: read a little further.
    int best = video_stream(video->format);
    AVCodecParameters *par = best >= 0 ? video->format->streams[best]->codecpar : NULL;
    if ((video->format->ctx_flags & AVFMTCTX_NOHEADER) || !par || par->width <= 0 || par->height <= 0
        || par->codec_id == AV_CODEC_ID_NONE) {
        video->format->probesize = 8 * 1024 * 1024;
        // Its decoders get the frame limit and one thread, as the poster's decoder does.
        unsigned streams = video->format->nb_streams;
        AVDictionary **options = streams ? av_calloc(streams, sizeof *options) : NULL;
        for (unsigned i = 0; options && i < streams; i++) {
            av_dict_set_int(&options[i], "max_pixels", max_pixels, 0);
            av_dict_set(&options[i], "threads", "1", 0);
        }
        status = avformat_find_stream_info(video->format, options);
        for (unsigned i = 0; options && i < streams; i++) av_dict_free(&options[i]);
        av_freep(&options);
        if (status >= 0) last_log[0] = 0;  // what it logged about streams it could not open
        if (interrupted(&video->reader)) return fail(err, errlen, -4, "cancelled");
        if (status < 0) {
            char why[200];
            describe(status, why, sizeof why);
            return fail(err, errlen, -1, "the stream cannot be read: %s", why);
        }
        best = video_stream(video->format);
    }
    if (best < 0) return fail(err, errlen, -2, "no video stream (audio only or data)");
    video->stream = video->format->streams[best];
    par = video->stream->codecpar;
    // The mov demuxer gives up an index it could not allocate (VV_MAX_ALLOC) without a word,
    // and the stream then reads as empty: say what happened instead of "no frame".
    if (video->stream->nb_frames > 0 && avformat_index_get_entries_count(video->stream) == 0
        && strncmp(video->format->iformat->name, "mov,", 4) == 0)
        return fail(err, errlen, -1, "the sample tables claim %lld samples, an index larger than viewerd lets FFmpeg allocate",
                    (long long)video->stream->nb_frames);
    const char *codec_name = avcodec_get_name(par->codec_id);
    if (par->codec_id == AV_CODEC_ID_NONE) return fail(err, errlen, -2, "the video codec is unknown");
    video->decoder = avcodec_find_decoder(par->codec_id);
    if (video->decoder && !decoder_allowed(video->decoder)) video->decoder = NULL;
    if (!video->decoder) return fail(err, errlen, -2, "the video codec %s is not one viewerd decodes", codec_name);
    if (par->width <= 0 || par->height <= 0) return fail(err, errlen, -1, "the video stream has no frame size");
    if ((int64_t)par->width * par->height > max_pixels)
        return fail(err, errlen, -3, "too large: the video's frames are %dx%d, %lld pixels, over the limit of %lld for a video's frames",
                    par->width, par->height, (long long)par->width * par->height, (long long)max_pixels);

    vv_info *info = &video->info;
    info->coded_width = par->width;
    info->coded_height = par->height;
    // Non-square pixels (anamorphic DVD, HDV): the picture is shown wider or narrower.
    AVRational sar = av_guess_sample_aspect_ratio(video->format, video->stream, NULL);
    info->width = par->width;
    info->height = par->height;
    if (sar.num > 0 && sar.den > 0 && sar.num != sar.den) {
        int64_t w = av_rescale(par->width, sar.num, sar.den);
        if (w >= 1 && w <= 4 * (int64_t)par->width) info->width = (int)w;
    }
    info->orientation = orientation_of(video->stream);
    int64_t duration = AV_NOPTS_VALUE;
    if (video->stream->duration > 0)
        duration = av_rescale_q(video->stream->duration, video->stream->time_base, AV_TIME_BASE_Q);
    else if (video->format->duration > 0)
        duration = video->format->duration;
    info->duration_ms = duration == AV_NOPTS_VALUE ? -1 : duration / 1000;
    info->frames = video->stream->nb_frames;
    if (info->frames <= 0 && duration != AV_NOPTS_VALUE) {
        AVRational rate = video->stream->avg_frame_rate.num > 0 ? video->stream->avg_frame_rate : video->stream->r_frame_rate;
        if (rate.num > 0 && rate.den > 0) info->frames = (int64_t)llround((double)duration / AV_TIME_BASE * av_q2d(rate));
    }
    snprintf(info->codec, sizeof info->codec, "%s", codec_name);
    snprintf(info->demuxer, sizeof info->demuxer, "%s", video->format->iformat->name);
    info->transfer = par->color_trc;
    info->primaries = par->color_primaries;
    info->peak_nits = light_peak(av_stream_get_side_data(video->stream, AV_PKT_DATA_CONTENT_LIGHT_LEVEL, NULL),
                                 av_stream_get_side_data(video->stream, AV_PKT_DATA_MASTERING_DISPLAY_METADATA, NULL));
    return 0;
}

int vv_probe_fd(int fd, int64_t max_pixels, const vv_cancel *cancel, vv_info *out, char *err, size_t errlen) {
    vv_video video;
    int status = video_open(&video, fd, max_pixels, cancel, err, errlen);
    if (status == 0) *out = video.info;
    video_close(&video);
    return status;
}

// --- Choosing and decoding the frame --------------------------------------------------------

typedef struct {
    AVCodecContext *codec;
    AVPacket *packet;
    AVFrame *frame;
    int at_end;
    // Frames before the first keyframe after a seek are predicted from frames the decoder
    // never saw (MPEG-2 shows them anyway, in the wrong colours): they are passed over.
    int need_key;
} vv_decoder;

// The next frame the decoder gives, reading packets of the stream as it needs them. 0 with
// a frame, 1 at the end of the stream, <0 an error (the packet budget spent: AVERROR(EAGAIN)).
static int next_frame(vv_video *video, vv_decoder *d, int *budget) {
    for (;;) {
        int status = avcodec_receive_frame(d->codec, d->frame);
        if (status == 0 && d->need_key && !d->frame->key_frame) {
            av_frame_unref(d->frame);
            continue;
        }
        if (status == 0) {
            d->need_key = 0;
            return 0;
        }
        if (status == AVERROR_EOF) return 1;
        if (status != AVERROR(EAGAIN)) return status;
        if (d->at_end) return 1;
        if (interrupted(&video->reader)) return AVERROR_EXIT;
        if ((*budget)-- <= 0) return AVERROR(EAGAIN);
        status = av_read_frame(video->format, d->packet);
        if (status < 0) {
            if (status == AVERROR_EXIT) return status;
            d->at_end = 1;  // end of file, or a damaged tail: what was decoded so far counts
            avcodec_send_packet(d->codec, NULL);
            continue;
        }
        if (d->packet->stream_index == video->stream->index) {
            status = avcodec_send_packet(d->codec, d->packet);
            // A damaged packet is skipped (the decoder conceals it), as players do.
            if (status < 0 && status != AVERROR(EAGAIN) && status != AVERROR_INVALIDDATA) {
                av_packet_unref(d->packet);
                return status;
            }
        }
        av_packet_unref(d->packet);
    }
}

// How far a frame is from one flat colour: the standard deviation of its luma, on a 64x36
// grey copy (a few microseconds), and its mean.
static void frame_spread(const AVFrame *frame, double *deviation, double *mean) {
    enum { w = 64, h = 36 };
    uint8_t grey[w * h];
    *deviation = 0;
    *mean = 0;
    struct SwsContext *sws = sws_getContext(frame->width, frame->height, frame->format, w, h, AV_PIX_FMT_GRAY8,
                                            SWS_AREA, NULL, NULL, NULL);
    if (!sws) return;
    uint8_t *planes[4] = {grey, NULL, NULL, NULL};
    int strides[4] = {w, 0, 0, 0};
    sws_scale(sws, (const uint8_t *const *)frame->data, frame->linesize, 0, frame->height, planes, strides);
    sws_freeContext(sws);
    double sum = 0, squares = 0;
    for (int i = 0; i < w * h; i++) {
        sum += grey[i];
        squares += (double)grey[i] * grey[i];
    }
    *mean = sum / (w * h);
    *deviation = sqrt(fmax(0, squares / (w * h) - *mean * *mean));
}

// A frame a viewer would not choose as a poster: one flat colour, or nearly black (a fade).
static double poster_score(const AVFrame *frame) {
    double deviation, mean;
    frame_spread(frame, &deviation, &mean);
    if (mean < 16 || mean > 240) return deviation / 4;  // nearly black or white: a fade
    return deviation;
}
#define VV_GOOD_POSTER 12.0

// Seeks to `target` (AV_TIME_BASE units): to the first keyframe at or after it when
// `forward`, else to the last one before it. A stream that cannot seek is read from where it is.
static void seek_to(vv_video *video, vv_decoder *d, int64_t target, int forward) {
    int64_t start = video->format->start_time == AV_NOPTS_VALUE ? 0 : video->format->start_time;
    int status = -1;
    // The start of a stream that seeks by timestamp (MPEG-TS, PS) is its first byte: a search
    // for its first timestamp may land on the next keyframe.
    if (target <= 0 && !(video->format->iformat->flags & AVFMT_NO_BYTE_SEEK))
        status = avformat_seek_file(video->format, -1, 0, 0, 0, AVSEEK_FLAG_BYTE);
    target = av_sat_add64(target, start);
    if (status < 0)
        status = forward ? avformat_seek_file(video->format, -1, target, target, INT64_MAX, 0)
                         : avformat_seek_file(video->format, -1, INT64_MIN, target, target, 0);
    if (status < 0 && forward) status = avformat_seek_file(video->format, -1, INT64_MIN, target, target, 0);
    avcodec_flush_buffers(d->codec);
    d->at_end = 0;
    d->need_key = 1;
}

static int64_t frame_time(const vv_video *video, const AVFrame *frame) {
    int64_t pts = frame->best_effort_timestamp;
    if (pts == AV_NOPTS_VALUE) return AV_NOPTS_VALUE;
    int64_t start = video->format->start_time == AV_NOPTS_VALUE ? 0 : video->format->start_time;
    return av_sat_sub64(av_rescale_q(pts, video->stream->time_base, AV_TIME_BASE_Q), start);
}

// The frame as 8-bit sRGB in memory, with the orientation to apply: at the size the target
// gives (what libvips would resize it to for the box; the frame's shown size, square pixels,
// when it cannot say), so that libvips only crops and turns it.
static int frame_image(const vv_video *video, const AVFrame *frame, const vv_target *target, vv_frame *out, char *err,
                       size_t errlen) {
    int64_t shown = (int64_t)video->info.width * frame->width / video->info.coded_width;
    int width = shown < 1 ? 1 : shown > INT_MAX ? INT_MAX : (int)shown;
    int height = frame->height;
    int resized_width, resized_height;
    if (target && target->size(target->context, width, height, video->info.orientation, &resized_width,
                               &resized_height) == 0 && resized_width >= 1 && resized_height >= 1) {
        width = resized_width;
        height = resized_height;
    }
    // Bicubic, whose support swscale widens with the shrink (no aliasing), as ffmpeg's scale
    // filter and thumbnailers use it.
    int transfer = frame->color_trc == AVCOL_TRC_UNSPECIFIED ? video->info.transfer : (int)frame->color_trc;
    int hdr = tm_is_hdr_transfer(transfer);
    struct SwsContext *sws = sws_getContext(frame->width, frame->height, frame->format, width, height,
                                            hdr ? AV_PIX_FMT_RGB48 : AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND,
                                            NULL, NULL, NULL);
    if (!sws) return fail(err, errlen, -1, "the frame's pixel format %s cannot be converted",
                          av_get_pix_fmt_name(frame->format) ? av_get_pix_fmt_name(frame->format) : "?");
    // The YCbCr matrix and range the stream says, else BT.709 for HD and BT.601 below it.
    int space = frame->colorspace;
    if (space == AVCOL_SPC_UNSPECIFIED || space == AVCOL_SPC_RESERVED || space > AVCOL_SPC_BT2020_CL)
        space = hdr ? AVCOL_SPC_BT2020_NCL : frame->height >= 720 ? AVCOL_SPC_BT709 : AVCOL_SPC_SMPTE170M;
    int full_range = frame->color_range == AVCOL_RANGE_JPEG;
    int *table, *inverse, src_range, dst_range, brightness, contrast, saturation;
    if (sws_getColorspaceDetails(sws, &inverse, &src_range, &table, &dst_range, &brightness, &contrast, &saturation) >= 0) {
        const enum AVPixelFormat f = frame->format;
        if (f == AV_PIX_FMT_YUVJ420P || f == AV_PIX_FMT_YUVJ422P || f == AV_PIX_FMT_YUVJ444P) full_range = 1;
        sws_setColorspaceDetails(sws, sws_getCoefficients(space), full_range, sws_getCoefficients(SWS_CS_DEFAULT), 1,
                                 brightness, contrast, saturation);
    }
    size_t stride = (size_t)width * 3;
    uint8_t *pixels = malloc(stride * (size_t)height);
    // HDR (PQ, HLG: an HLG stream is not SDR): 16-bit RGB first, then tone mapped to sRGB.
    uint16_t *wide = hdr ? malloc(stride * 2 * (size_t)height) : NULL;
    if (!pixels || (hdr && !wide)) {
        free(pixels);
        sws_freeContext(sws);
        return fail(err, errlen, -1, "out of memory for a %dx%d frame", width, height);
    }
    uint8_t *planes[4] = {wide ? (uint8_t *)wide : pixels, NULL, NULL, NULL};
    int strides[4] = {(int)(wide ? stride * 2 : stride), 0, 0, 0};
    sws_scale(sws, (const uint8_t *const *)frame->data, frame->linesize, 0, frame->height, planes, strides);
    sws_freeContext(sws);
    if (wide) {
        const AVFrameSideData *cll = av_frame_get_side_data(frame, AV_FRAME_DATA_CONTENT_LIGHT_LEVEL);
        const AVFrameSideData *display = av_frame_get_side_data(frame, AV_FRAME_DATA_MASTERING_DISPLAY_METADATA);
        int peak = light_peak(cll ? cll->data : NULL, display ? display->data : NULL);
        tm_to_srgb8(transfer, frame->color_primaries == AVCOL_PRI_UNSPECIFIED ? video->info.primaries : frame->color_primaries,
                    peak > 0 ? peak : video->info.peak_nits, wide, (size_t)width * 3, pixels, stride, width, height, 3);
        free(wide);
    }
    *out = (vv_frame){.pixels = pixels, .width = width, .height = height, .stride = stride,
                      .orientation = video->info.orientation};
    return 0;
}

int vv_poster_fd(int fd, int64_t time_ms, int64_t max_pixels, const vv_target *target, const vv_cancel *cancel,
                 vv_info *info, vv_frame *out, char *err, size_t errlen) {
    *out = (vv_frame){0};
    vv_video video;
    int status = video_open(&video, fd, max_pixels, cancel, err, errlen);
    if (status != 0) {
        video_close(&video);
        return status;
    }
    *info = video.info;

    vv_decoder d = {.need_key = 1};
    d.codec = avcodec_alloc_context3(video.decoder);
    d.packet = av_packet_alloc();
    d.frame = av_frame_alloc();
    AVFrame *best = av_frame_alloc();
    double best_score = -1;
    if (!d.codec || !d.packet || !d.frame || !best) {
        status = fail(err, errlen, -1, "out of memory");
        goto done;
    }
    if (avcodec_parameters_to_context(d.codec, video.stream->codecpar) < 0) {
        status = fail(err, errlen, -1, "out of memory");
        goto done;
    }
    d.codec->thread_count = 1;         // two workers already use both cores; no thread start-up per job
    d.codec->max_pixels = max_pixels;  // a frame larger than its header said is refused, not allocated
    d.codec->pkt_timebase = video.stream->time_base;
    if ((status = avcodec_open2(d.codec, video.decoder, NULL)) < 0) {
        char why[200];
        describe(status, why, sizeof why);
        status = fail(err, errlen, -1, "the %s decoder cannot start: %s", video.info.codec, why);
        goto done;
    }

    int last_error = 0;
    if (time_ms >= 0) {
        // A time asked for: the frame shown at that time (the last one when it is past the
        // end). Demuxers that seek by timestamps (MPEG-TS and PS) may land after the last
        // keyframe, where nothing decodes: then from earlier points, back to the start.
        int64_t target = time_ms * 1000;
        int64_t end = video.info.duration_ms > 0 ? video.info.duration_ms * 1000 : target;
        int64_t from = target < end ? target : end;
        const int64_t points[] = {from, from - 2000000, from - 10000000, 0};
        // A demuxer that seeks by timestamp may also land between keyframes before the time,
        // where the first frame that decodes is the next keyframe, past it: that frame is kept
        // only in case no earlier point decodes.
        AVFrame *overshoot = av_frame_alloc();
        if (!overshoot) {
            status = fail(err, errlen, -1, "out of memory");
            goto done;
        }
        for (size_t i = 0; i < sizeof points / sizeof *points && best_score < 0; i++) {
            int64_t point = points[i] > 0 ? points[i] : 0;
            if (i > 0 && point >= (points[i - 1] > 0 ? points[i - 1] : 0)) continue;  // tried already
            seek_to(&video, &d, point, 0);
            int budget = VV_PACKET_BUDGET * 4;
            for (;;) {
                int got = next_frame(&video, &d, &budget);
                if (got != 0) {
                    if (got < 0) last_error = got;
                    break;
                }
                int64_t t = frame_time(&video, d.frame);
                if (best_score < 0 && point > 0 && t != AV_NOPTS_VALUE && t > target) {
                    av_frame_unref(overshoot);
                    av_frame_move_ref(overshoot, d.frame);
                    break;
                }
                if (best_score >= 0 && t != AV_NOPTS_VALUE && t > target) break;  // the previous one was shown then
                av_frame_unref(best);
                av_frame_move_ref(best, d.frame);
                best_score = 0;
                if (t != AV_NOPTS_VALUE && t == target) break;
            }
            if (last_error == AVERROR_EXIT) break;
        }
        if (best_score < 0 && overshoot->data[0]) {
            av_frame_unref(best);
            av_frame_move_ref(best, overshoot);
            best_score = 0;
        }
        av_frame_free(&overshoot);
    } else {
        // A representative frame: the first keyframe after 10 % of the duration, or later ones
        // while the frames found are near-uniform; the best seen when all are.
        int64_t duration = video.info.duration_ms > 0 ? video.info.duration_ms * 1000 : 0;
        // Frames no other frame refers to need not be decoded on the way to the target: which
        // frame near 10 % becomes the poster does not matter, and B-frames are most of them.
        d.codec->skip_frame = AVDISCARD_NONREF;
        size_t tries = duration > 0 ? sizeof representative_fractions / sizeof *representative_fractions : 1;
        for (size_t i = 0; i < tries && best_score < VV_GOOD_POSTER; i++) {
            int64_t target = (int64_t)(duration * representative_fractions[i]);
            if (duration > 0) seek_to(&video, &d, target, 1);
            int budget = VV_PACKET_BUDGET;
            // Without a duration (a live capture, a cut stream): the frames from the start,
            // until one is good. With one: the first frame at the target, which is the
            // keyframe found when the file has one after it, else (one keyframe at the
            // start, a demuxer that seeks only backward) the frames decoded up to it.
            int candidates = duration > 0 ? 1 : 60;
            for (int n = 0; n < candidates;) {
                int got = next_frame(&video, &d, &budget);
                if (got != 0) {
                    if (got < 0) last_error = got;
                    break;
                }
                int64_t t = frame_time(&video, d.frame);
                int early = duration > 0 && t != AV_NOPTS_VALUE && t < target;
                // An early frame stands in only until the target is reached (a damaged tail).
                double score = early ? 0 : poster_score(d.frame);
                if (score > best_score) {
                    av_frame_unref(best);
                    av_frame_move_ref(best, d.frame);
                    best_score = score;
                } else {
                    av_frame_unref(d.frame);
                }
                if (early) continue;
                n++;
                if (best_score >= VV_GOOD_POSTER) break;
            }
            if (last_error == AVERROR_EXIT) break;
        }
    }
    if (interrupted(&video.reader)) {
        status = fail(err, errlen, -4, "cancelled");
        goto done;
    }
    if (best_score < 0) {
        char why[200] = "no frame could be decoded";
        if (last_error == AVERROR(EAGAIN)) snprintf(why, sizeof why, "no frame within %d packets", VV_PACKET_BUDGET);
        else if (last_error < 0 || last_log[0]) describe(last_error, why, sizeof why);
        status = fail(err, errlen, -1, "no frame: %s", why);
        goto done;
    }
    status = frame_image(&video, best, target, out, err, errlen);

done:
    av_frame_free(&best);
    av_frame_free(&d.frame);
    av_packet_free(&d.packet);
    avcodec_free_context(&d.codec);
    video_close(&video);
    return status;
}
