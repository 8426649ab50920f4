// FFmpeg's video decode (video.c): the media info and poster frames of videos (issue 17).
// Only this target includes FFmpeg's headers; Swift sees the vv_* functions declared here.
#ifndef VIEWERD_FFMPEG_SHIM_H
#define VIEWERD_FFMPEG_SHIM_H

#include <stddef.h>
#include <stdint.h>

#include "vips_shim.h"

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
} vv_info;

/// Sends FFmpeg's log to a per-thread "last error" kept for failure messages; call once.
void vv_init(void);

/// Reads a video's headers from the descriptor (pread: its offset is kept; not closed).
/// Returns 0, or -1 damaged, -2 not a video viewerd decodes (no video stream, unknown
/// codec, not a container it reads), -3 frames over `max_pixels`, -4 cancelled; `err`
/// (errlen bytes) then says why.
int vv_probe_fd(int fd, int64_t max_pixels, vs_cancel *cancel, vv_info *out, char *err, size_t errlen);

/// The poster frame of a video as an 8-bit sRGB image in memory, tagged with the EXIF
/// orientation that turns it upright. `time_ms` < 0: a representative frame (the first
/// keyframe after 10 % of the duration, later ones while it is near-uniform); else the frame
/// shown at that time. Returns as vv_probe_fd; `info` is filled when it returns 0.
/// The frame is converted straight to the size vs_thumbnail_image resizes it to for the box
/// (`width`, `height`, `crop`, `size` as vs_thumbnail_fd takes them): libvips then only crops,
/// turns and encodes it, and one conversion replaces a full-size one and a resize.
int vv_poster_fd(int fd, int64_t time_ms, int64_t max_pixels, int width, int height, int crop, int size,
                 vs_cancel *cancel, vv_info *info, VipsImage **out, char *err, size_t errlen);

#endif
