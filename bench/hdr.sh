#!/bin/sh
# bench/hdr.sh: what HDR to SDR costs and how right it is (issue 31). An SDR picture (ffmpeg's
# testsrc2) is encoded as HEVC Main 10 three ways at the same size: plain SDR (BT.709), HLG and
# PQ at a 100-nit reference white (zscale, BT.2020). Through a fresh daemon with one worker,
# each clip's poster is rendered RUNS times to a BOX-px JPEG (each at its own box, so each is a
# miss) and the median wall time is taken as viewerctl sees it; the HDR ones' ratio to the SDR
# one is the cost of the tone mapping (goal: at most 1.5). Then each HDR clip's full-size
# poster is compared with the SDR picture by PSNR (ffmpeg's psnr filter), beside zscale's own
# inverse of the same frame.
#
# usage: [RUNS=9] [SIZE=1920x1080] [BOX=256] [BIN=.build/release] bench/hdr.sh   (BIN: where viewerd and
#        viewerctl are; built by `swift build -c release` when it is the default.) About a minute.
# Prints a Markdown table.
set -eu

cd "$(dirname "$0")/.."
runs=${RUNS:-9}
size=${SIZE:-1920x1080}
box=${BOX:-256}  # the tone mapping runs at the poster's size: BOX=1920 is its worst case
bin=${BIN:-}
if [ -z "$bin" ]; then
    swift build --no-color-diagnostics -c release >&2
    bin=$(swift build --no-color-diagnostics -c release --show-bin-path)
fi
work=$(mktemp -d)
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    rm -rf "$work"
}
trap cleanup EXIT INT TERM

ff() { ffmpeg -hide_banner -loglevel error -y "$@"; }
ff -f lavfi -i "testsrc2=s=$size:r=10:d=1" -frames:v 1 "$work/sdr.png"
x265="-c:v libx265 -x265-params log-level=error -tag:v hvc1"
# shellcheck disable=SC2086
ff -loop 1 -i "$work/sdr.png" -t 2 -r 10 -vf "scale=out_color_matrix=bt709,format=yuv420p10le" $x265 \
    -colorspace bt709 "$work/sdr.mp4"
for t in arib-std-b67 smpte2084; do
    # shellcheck disable=SC2086
    ff -loop 1 -i "$work/sdr.png" -t 2 -r 10 \
        -vf "zscale=tin=iec61966-2-1:pin=709:min=gbr:rin=full:t=$t:p=2020:m=2020_ncl:r=limited:npl=100,format=yuv420p10le" \
        $x265 -color_primaries bt2020 -color_trc $t -colorspace bt2020nc "$work/$t.mp4"
done

"$bin/viewerd" --socket "$work/d.sock" --cache-dir "$work/cache" --workers 1 >"$work/d.log" 2>&1 &
daemon=$!
i=0
while [ ! -S "$work/d.sock" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
ctl() { "$bin/viewerctl" --socket "$work/d.sock" "$@" >/dev/null; }
ctl render "$work/sdr.mp4" --size 64 -o "$work/warm.jpg"  # a started worker, FFmpeg loaded

median_ms() {  # CLIP: the median wall time of RUNS renders, each at its own box
    n=0
    while [ $n -lt "$runs" ]; do
        start=$(date +%s%N)
        ctl render "$1" --size $((box - n)) -o "$work/t.jpg"
        echo $(( ($(date +%s%N) - start) / 1000 ))
        n=$((n + 1))
    done | sort -n | awk '{ v[NR] = $1 } END { printf "%.1f", v[int((NR + 1) / 2)] / 1000 }'
}
psnr() {  # A B: PSNR of A against B, dB
    ffmpeg -hide_banner -i "$1" -i "$2" -lavfi "[0]format=rgb24[a];[1]format=rgb24[b];[a][b]psnr" -f null - 2>&1 \
        | sed -n 's/.*average:\([0-9.inf]*\).*/\1/p'
}
w=${size%x*} h=${size#*x}
sdr_ms=$(median_ms "$work/sdr.mp4")
echo "| clip ($size, HEVC Main 10) | poster ms (median of $runs) | × SDR | PSNR viewerd | PSNR zscale |"
echo "| --- | ---: | ---: | ---: | ---: |"
echo "| SDR BT.709 | $sdr_ms | 1.00 | | |"
for t in arib-std-b67 smpte2084; do
    ms=$(median_ms "$work/$t.mp4")
    ctl render "$work/$t.mp4" --size "${w}x$h" -o "$work/$t.png"
    ff -i "$work/$t.mp4" -frames:v 1 \
        -vf "zscale=t=linear:npl=100,format=gbrpf32le,zscale=p=709:t=iec61966-2-1:m=gbr:r=full,format=rgb24" "$work/$t.zscale.png"
    name=$([ $t = smpte2084 ] && echo PQ || echo HLG)
    echo "| $name BT.2020 | $ms | $(echo "$ms $sdr_ms" | awk '{ printf "%.2f", $1 / $2 }') | $(psnr "$work/$t.png" "$work/sdr.png") | $(psnr "$work/$t.zscale.png" "$work/sdr.png") |"
done
