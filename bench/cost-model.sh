#!/bin/sh
# bench/cost-model.sh: what a render really costs, per loader class, next to what viewerd
# estimates before decoding (Renderer.estimateCost, from HeaderSniffer's header). The
# estimate admits work against --memory-budget, so it must not be below a job's real peak.
#
# For each class it makes one photo-like image with the vips CLI (no downloads), starts a
# fresh release daemon with one worker on a private socket, warms the worker with a tiny
# PNG, then renders the image to a 256-px JPEG through viewerctl. The job's peak is the
# worker's VmHWM after the render minus its VmHWM after the warm-up (libvips loaded, its
# threads started): what the job added, which is what the estimate stands for.
#
# usage: [RUNS=3] bench/cost-model.sh [WORKDIR]   (WORKDIR keeps the images for another run;
#        default: a fresh temporary directory, removed after). About 4 minutes.
# Prints a Markdown table (docs/RENDERING.md, "Limits and cost").
set -eu

cd "$(dirname "$0")/.."
if [ $# -ge 1 ]; then work=$1; mkdir -p "$work"; keep=1; else work=$(mktemp -d); keep=0; fi
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    if [ "$keep" = 0 ]; then rm -rf "$work"; fi
}
trap cleanup EXIT INT TERM

# One call for viewerd, viewerctl and viewerd-cost-estimate, with the Makefile's flags (its
# SWIFT_BUILD): the same release build as `make build`'s, not a rebuild of it.
swift build --no-color-diagnostics -c release >&2
bin=$(swift build --no-color-diagnostics -c release --show-bin-path)

# Photo-like content: noise at a quarter of the size, enlarged (so neighbouring pixels
# correlate and the codecs compress it about as well as a photo), over a diagonal gradient.
# Made once at 24 MP; the 12, 3 and 1 MP images are crops of it. Two sizes a class show how
# the cost grows (the model has a fixed part and a part per row or per pixel).
mkimages() {
    cd "$work"
    [ -f b1.v ] && return
    vips gaussnoise noise.v 4500 1000 --mean 60 --sigma 40
    vips bandfold noise.v noise3.v --factor 3
    vips resize noise3.v up.v 4 --kernel linear
    vips xyz xy.v 6000 4000
    vips bandmean xy.v xym.v
    vips linear xym.v grad.v 0.03 0
    vips add up.v grad.v sum.v
    vips cast sum.v cast.v uchar
    vips copy cast.v base.v --interpretation srgb
    vips crop base.v b12.v 0 0 4000 3000
    vips crop base.v b3.v 0 0 2000 1500
    vips crop base.v b1.v 0 0 1200 900
    vips black tiny.v 16 16 --bands 3
    vips pngsave tiny.v tiny.png
    rm -f noise.v noise3.v up.v xy.v xym.v grad.v sum.v cast.v
}

# class|file|command that makes it from the base images
classes='baseline JPEG|jpeg-baseline.jpg|vips jpegsave base.v jpeg-baseline.jpg --Q 85
baseline JPEG|jpeg-baseline-12.jpg|vips jpegsave b12.v jpeg-baseline-12.jpg --Q 85
progressive JPEG|jpeg-progressive.jpg|vips jpegsave base.v jpeg-progressive.jpg --Q 85 --interlace
progressive JPEG|jpeg-progressive-12.jpg|vips jpegsave b12.v jpeg-progressive-12.jpg --Q 85 --interlace
progressive JPEG 4:4:4|jpeg-progressive-444.jpg|vips jpegsave base.v jpeg-progressive-444.jpg --Q 85 --interlace --subsample-mode off
progressive JPEG 4:4:4|jpeg-progressive-444-12.jpg|vips jpegsave b12.v jpeg-progressive-444-12.jpg --Q 85 --interlace --subsample-mode off
PNG|png.png|vips pngsave base.v png.png
PNG|png-12.png|vips pngsave b12.v png-12.png
interlaced PNG|png-interlaced.png|vips pngsave base.v png-interlaced.png --interlace
interlaced PNG|png-interlaced-12.png|vips pngsave b12.v png-interlaced-12.png --interlace
WebP|webp.webp|vips webpsave base.v webp.webp --Q 80
WebP|webp-12.webp|vips webpsave b12.v webp-12.webp --Q 80
HEIC|heic.heic|vips heifsave b12.v heic.heic --compression hevc --Q 50
HEIC|heic-24.heic|vips heifsave base.v heic-24.heic --compression hevc --Q 50
AVIF|avif.avif|vips heifsave b12.v avif.avif --compression av1 --Q 50 --effort 2
JXL|jxl.jxl|vips jxlsave b12.v jxl.jxl --Q 75 --effort 4
JPEG 2000|jp2.jp2|vips jp2ksave base.v jp2.jp2
JPEG 2000 untiled|jp2-untiled.jp2|vips jp2ksave b12.v jp2-untiled.jp2 --tile-width 4000 --tile-height 3000
TIFF|tiff.tif|vips tiffsave base.v tiff.tif --compression lzw
TIFF|tiff-12.tif|vips tiffsave b12.v tiff-12.tif --compression lzw
GIF|gif.gif|vips gifsave b3.v gif.gif
GIF|gif-1.gif|vips gifsave b1.v gif-1.gif
H.264 1080p MP4|h264-1080.mp4|ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=4 -c:v libx264 -preset veryfast -g 30 -pix_fmt yuv420p h264-1080.mp4
HEVC 2160p MP4|hevc-2160.mp4|ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc2=size=3840x2160:rate=30:duration=2 -c:v libx265 -preset ultrafast -x265-params log-level=error -g 30 hevc-2160.mp4
VP9 1080p WebM|vp9-1080.webm|ffmpeg -nostdin -loglevel error -y -f lavfi -i testsrc2=size=1920x1080:rate=30:duration=3 -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 30 vp9-1080.webm'

(mkimages) >&2
while IFS='|' read -r class file command; do
    [ -f "$work/$file" ] || (cd "$work" && $command) >&2
done <<EOF
$classes
EOF

# The daemon's children: its one worker, once a job has started it.
worker_of() { awk -v parent="$daemon" '$4 == parent { print $1 }' /proc/[0-9]*/stat 2>/dev/null || true; }
hwm_kib() { awk '/^VmHWM:/ { print $2 }' "/proc/$1/status"; }
now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

# One render of $1 by a fresh daemon's one worker: prints the job's peak (KiB) and wall ms.
measure() {
    run="$work/run"; rm -rf "$run"; mkdir -p "$run"
    "$bin/viewerd" --workers 1 --socket "$run/s" --cache-dir "$run/cache" --memory-budget 16G \
        --log-level warning </dev/null 2>"$run/log" &
    daemon=$!
    i=0; while [ ! -S "$run/s" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
    ctl "$work/tiny.png" "$run/tiny.jpg"
    worker=$(worker_of)
    idle=$(hwm_kib "$worker")
    t0=$(now_ms); ctl "$1" "$run/out.jpg"; t1=$(now_ms)
    [ "$(worker_of)" = "$worker" ] || { echo "cost-model: the worker changed during $1" >&2; exit 1; }
    peak=$(hwm_kib "$worker")
    kill "$daemon"; wait "$daemon" || true; daemon=
    echo "$((peak - idle)) $((t1 - t0))"
}
ctl() { "$bin/viewerctl" --socket "$run/s" render "$1" --size 256x256 -o "$2" >/dev/null </dev/null; }

# A row: the largest job peak of the renders and their median time, beside the estimate.
row() {
    python3 -c '
import sys
cls, size, w, h, est, costly, *runs = sys.argv[1:]
peak = max(int(r.split()[0]) for r in runs) / 1024
times = sorted(int(r.split()[1]) for r in runs)
estimate = int(est) / 2**20
print(f"| {cls} | {int(size) / 2**20:.1f} MiB | {w}×{h} | {peak:.1f} | {estimate:.1f} | {estimate / peak:.2f} | {costly} | {times[len(times) // 2]} |")
' "$@"
}

runs=${RUNS:-3}
echo "$runs renders a file, each by a fresh daemon; job peak: the largest of them; time: the median" >&2
printf '| class | file size | W×H | job peak MiB | estimate MiB | estimate / peak | costly | wall ms |\n'
printf '| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n'
while IFS='|' read -r class file command; do
    path="$work/$file"
    # In its own shell: a daemon left by a failed render is stopped there.
    results=$(trap '[ -z "$daemon" ] || kill "$daemon"' EXIT; n=0; while [ $n -lt "$runs" ]; do measure "$path"; n=$((n + 1)); done)
    # The estimate, as the daemon makes it (HeaderSniffer, then Renderer.estimateCost).
    set -- $("$bin/viewerd-cost-estimate" --box 256 "$path")
    width=$3 height=$4 estimate=$5 costly=$6
    echo "$results" | {
        set --
        while read -r line; do set -- "$@" "$line"; done
        row "$class" "$(stat -c %s "$path")" "$width" "$height" "$estimate" "$costly" "$@"
    }
done <<EOF
$classes
EOF
