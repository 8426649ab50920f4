// FFmpeg's libraries (libavformat, libavcodec, libswscale, libavutil), for the poster frames
// and media info of videos (issue 17). Only CFFmpegShim's video.c includes them; Swift sees
// the vv_* functions of ffmpeg_shim.h.
#include <libavformat/avformat.h>
#include <libavcodec/avcodec.h>
#include <libswscale/swscale.h>
#include <libavutil/avutil.h>
