// FFmpeg's video decode (video.c): the media info and poster frames of videos (issue 17).
// Only this target includes FFmpeg's headers; Swift sees the vv_* functions declared here.
// It knows nothing of libvips: a poster is 8-bit RGB pixels in memory (vv_frame), which
// Rendering hands to libvips; the size to convert to and the cancel request come from the
// caller, as callbacks (vv_target, vv_cancel).
#ifndef VIEWERD_FFMPEG_SHIM_H
#define VIEWERD_FFMPEG_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// A render's cancel request, asked between reads and packets: `requested(context)` returns
/// nonzero once the render is to stop. Called on the decoding thread.
typedef struct {
    int (*requested)(const void *context);
    const void *context;
} vv_cancel;

/// The size a poster frame is converted to: `size(context, ...)` gets the frame's shown size
/// (square pixels) and the EXIF orientation that turns it upright, and returns 0 with the
/// size, unturned, to convert it to (what the caller's resize would make of it), or nonzero
/// to keep the shown size.
typedef struct {
    int (*size)(const void *context, int width, int height, int orientation, int *out_width, int *out_height);
    const void *context;
} vv_target;

/// A poster frame: 8-bit RGB, `stride` bytes a row, and the EXIF orientation (1-8) that turns
/// it upright. `pixels` is malloc'd and the caller's to free (free()).
typedef struct {
    uint8_t *pixels;
    int width;
    int height;
    size_t stride;
    int orientation;
} vv_frame;

/// What a video's headers say (issue 17).
typedef struct {
    int coded_width;      // the frames' size as decoded
    int coded_height;
    int width;            // as shown, before turning: non-square pixels applied
    int height;
    int orientation;      // EXIF-style 1-8 from the container's display matrix
    int64_t duration_ms;  // -1 when unknown
    int64_t frames;       // the frame count, from the header or duration x rate; 0 unknown
    char codec[32];       // FFmpeg's codec name, e.g. "h264"
    char demuxer[48];     // FFmpeg's demuxer name, e.g. "mov,mp4,m4a,3gp,3g2,mj2"
    int transfer;         // H.273 transfer the stream says (16 PQ, 18 HLG); 2 unspecified
    int primaries;        // H.273 primaries (1 BT.709, 9 BT.2020); 2 unspecified
    int peak_nits;        // the content light level or mastering display peak; 0 unknown
} vv_info;

/// Sends FFmpeg's log to a per-thread "last error" kept for failure messages; call once.
void vv_init(void);

/// Reads a video's headers from the descriptor (pread: its offset is kept; not closed).
/// Returns 0, or -1 damaged, -2 not a video viewerd decodes (no video stream, unknown
/// codec, not a container it reads), -3 frames over `max_pixels`, -4 cancelled; `err`
/// (errlen bytes) then says why.
int vv_probe_fd(int fd, int64_t max_pixels, const vv_cancel *cancel, vv_info *out, char *err, size_t errlen);

/// The poster frame of a video as 8-bit RGB pixels (sRGB) in memory, with the EXIF orientation
/// that turns it upright. `time_ms` < 0: a representative frame (the first keyframe after 10 %
/// of the duration, later ones while it is near-uniform); else the frame shown at that time.
/// Returns as vv_probe_fd; `info` and `out` are filled when it returns 0.
/// The frame is converted straight to the size `target` gives (NULL: its shown size): the
/// caller's resize then has nothing left to do, and one conversion replaces a full-size one
/// and a resize. `cancel` may be NULL.
int vv_poster_fd(int fd, int64_t time_ms, int64_t max_pixels, const vv_target *target, const vv_cancel *cancel,
                 vv_info *info, vv_frame *out, char *err, size_t errlen);

#endif
