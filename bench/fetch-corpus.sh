#!/bin/sh
# Fetches and prepares the benchmark corpus of `make bench` (see BENCHMARKS.md). Idempotent:
# every step is skipped when its output is already there, so a second run takes a second.
#
#   bench/fetch-corpus.sh [ROOT]      ROOT defaults to ${XDG_CACHE_HOME:-~/.cache}/viewerd-bench
#
# ROOT/corpus/originals  the JPEG, PNG and WebP originals of Debian's plasma-workspace-wallpapers
#                        and gnome-backgrounds (apt-get download, dpkg-deb -x; nothing installed),
#                        screenshots left out: about 60 files, up to 5120x2880
# ROOT/corpus/generated  the extremes, made with the vips CLI from four of those photographs
#                        (tiled 2x2, resized, with a little sensor-like noise so that they
#                        compress like photographs): a 24-megapixel baseline JPEG, the same image
#                        as a progressive JPEG, and a 50-megapixel PNG
# ROOT/corpus/http       the http part's large JPEG (issue 33): the 24 MP baseline JPEG enlarged to
#                        7360x4912, the size of imgproxy's published benchmark (kept apart from
#                        generated/, whose files the cold part renders)
# ROOT/corpus/library    a real library's kinds of file, 8 distinct images each (the mosaic of
#                        the four photographs cropped at 8 offsets, each with noise of its own
#                        seed), one folder per class:
#                          heic/            12 MP (4032x3024) HEIC with a 320x240 thumbnail
#                                           item, as phones write (heif-enc -t 320)
#                          progressive/     24 MP (6000x4000) progressive JPEG
#                          interlaced-png/  12 MP Adam7-interlaced PNG
#                          avif/            12 MP AVIF (AV1 at the lowest effort)
#                          camera/          24 MP baseline JPEG with a 160x120 EXIF thumbnail
#                                           and EXIF orientation 1 to 8: viewerd-bench makes
#                                           these itself from progressive/, at its start,
#                                           because the EXIF writer is Swift (ImageFixtures)
#                        Under three minutes on two cores, once (the HEIC encodes take most).
# ROOT/corpus/video      the video part's clips (issue 17), made with the ffmpeg CLI from its
#                        lavfi test sources (testsrc2, mandelbrot, life), 3 to 5 s each, every
#                        one fading in from black (a naive first frame is black) with a keyframe
#                        each second: H.264, HEVC (up to 3840x2160), VP8, VP9, AV1, MPEG-4 part
#                        2 and MPEG-2 in MP4, MOV, WebM, Matroska, AVI and MPEG-TS, and
#                        phone-style clips whose display matrix turns them 90 or 270 degrees
#                        (list: video_clips below). About two minutes on two cores, once.
# ROOT/album             2,000 copies of the originals under other names (the scrolled album)
# ROOT/warm              2,000 more copies (the folder a second client warms in the background)
#
# The copies are real copies (each its own inode): viewerd keys renditions by the file's
# identity, so hard links would all share one rendition.
set -eu

ROOT=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/viewerd-bench}
CORPUS=$ROOT/corpus
ORIGINALS=$CORPUS/originals
GENERATED=$CORPUS/generated
COPIES=${VIEWERD_BENCH_COPIES:-2000}
PACKAGES="plasma-workspace-wallpapers gnome-backgrounds"

say() { echo "fetch-corpus: $*"; }
need() { command -v "$1" >/dev/null 2>&1 || { echo "fetch-corpus: $1 is missing ($2)" >&2; exit 1; }; }
need apt-get "Debian's apt"
need dpkg-deb "Debian's dpkg"
need vips "apt-get install libvips-tools (make deps)"
need heif-enc "apt-get install libheif-examples (make test-deps)"

mkdir -p "$ORIGINALS" "$GENERATED"

# 1. The originals.
if [ ! -f "$ORIGINALS/.complete" ]; then
    work=$(mktemp -d "${TMPDIR:-/tmp}/viewerd-corpus.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    say "downloading $PACKAGES"
    # apt-get download writes into the current directory; _apt cannot always write to a
    # private temporary directory, so let it (the download is then "unsandboxed", harmless).
    chmod 755 "$work"
    if ! (cd "$work" && apt-get download -q $PACKAGES); then
        say "download failed; refreshing the package lists (apt-get update) and retrying"
        SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
        $SUDO apt-get update -qq
        (cd "$work" && apt-get download -q $PACKAGES)
    fi
    for deb in "$work"/*.deb; do dpkg-deb -x "$deb" "$work/root"; done
    # Flatten to unique names: plasma's Kay/contents/images_dark/5120x2880.png becomes
    # plasma-Kay-images_dark-5120x2880.png; gnome's adwaita-l.webp gnome-adwaita-l.webp.
    find "$work/root" -type f \( -iname '*.jpg' -o -iname '*.jpeg' -o -iname '*.png' -o -iname '*.webp' \) \
        ! -name 'screenshot.*' | sort | while read -r f; do
        case $f in
            */usr/share/wallpapers/*)
                rel=${f#*/usr/share/wallpapers/}
                name=plasma-$(echo "$rel" | sed 's|/contents/|-|; s|/|-|g') ;;
            */usr/share/backgrounds/*)
                name=gnome-$(basename "$f") ;;
            *) name=other-$(basename "$f") ;;
        esac
        cp "$f" "$ORIGINALS/$name"
    done
    touch "$ORIGINALS/.complete"
    rm -rf "$work"
    trap - EXIT
    say "$(ls "$ORIGINALS" | wc -l) originals in $ORIGINALS"
else
    say "originals present ($(ls "$ORIGINALS" | wc -l) files)"
fi

# mosaic OUT: the 2x2 mosaic (5120x3200) of four 2560x1600 photographs of the plasma set,
# what the extremes and the library classes are made from.
mosaic() {
    tiles=""
    for p in Path Autumn ColdRipple FallenLeaf; do
        tiles="$tiles $ORIGINALS/plasma-$p-images-2560x1600.jpg"
    done
    vips arrayjoin "${tiles# }" "$1" --across 2
}

# 2. The extremes, from four 2560x1600 photographs of the plasma set.
BASE_JPEG=$GENERATED/photo-24mp-baseline.jpg
PROG_JPEG=$GENERATED/photo-24mp-progressive.jpg
BIG_PNG=$GENERATED/photo-50mp.png
if [ ! -f "$BASE_JPEG" ] || [ ! -f "$PROG_JPEG" ] || [ ! -f "$BIG_PNG" ]; then
    say "generating the 24 MP JPEGs and the 50 MP PNG with vips"
    work=$(mktemp -d "${TMPDIR:-/tmp}/viewerd-extremes.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    # The mosaic at 6000x4000 (24 MP) with mild noise (sigma 4) like a sensor's.
    mosaic "$work/mosaic.v"
    vips resize "$work/mosaic.v" "$work/big.v" 1.171875 --vscale 1.25
    vips gaussnoise "$work/noise.v" 6000 4000 --sigma 4 --mean 0
    vips add "$work/big.v" "$work/noise.v" "$work/noisy.v"
    vips cast "$work/noisy.v" "$work/photo.v" uchar
    if [ ! -f "$BASE_JPEG" ]; then
        vips jpegsave "$work/photo.v" "$BASE_JPEG.tmp.jpg" --Q 90
        mv -f "$BASE_JPEG.tmp.jpg" "$BASE_JPEG"
    fi
    if [ ! -f "$PROG_JPEG" ]; then
        vips jpegsave "$work/photo.v" "$PROG_JPEG.tmp.jpg" --Q 90 --interlace
        mv -f "$PROG_JPEG.tmp.jpg" "$PROG_JPEG"
    fi
    if [ ! -f "$BIG_PNG" ]; then
        # 8660x5774 = 50.0 MP.
        vips resize "$work/photo.v" "$work/fifty.v" 1.443334 --vscale 1.4435
        vips pngsave "$work/fifty.v" "$BIG_PNG.tmp.png" && mv -f "$BIG_PNG.tmp.png" "$BIG_PNG"
    fi
    rm -rf "$work"
    trap - EXIT
fi
say "extremes: $(for f in "$BASE_JPEG" "$PROG_JPEG" "$BIG_PNG"; do printf '%s %sx%s  ' "$(basename "$f")" "$(vipsheader -f width "$f" 2>/dev/null)" "$(vipsheader -f height "$f" 2>/dev/null)"; done)"

# 2a. The http part's large JPEG: 7360x4912 (36 MP) from the 24 MP one.
LARGE_JPEG=$CORPUS/http/photo-7360x4912.jpg
if [ ! -f "$LARGE_JPEG" ]; then
    say "generating the 7360x4912 JPEG with vips"
    mkdir -p "$CORPUS/http"
    vips thumbnail "$BASE_JPEG" "$LARGE_JPEG.tmp.jpg[Q=90]" 7360 --height 4912 --size force
    mv -f "$LARGE_JPEG.tmp.jpg" "$LARGE_JPEG"
fi

# 2b. The library classes. Each file is a crop of the 2x2 mosaic at an offset of its own,
# with noise of a seed of its own, so that a cold run decodes 8 different files per class.
# Each file is written under a hidden name and renamed, so an interrupted run leaves none half made.
LIBRARY=$CORPUS/library
LIBRARY_FILES=8
if [ ! -f "$LIBRARY/.complete-$LIBRARY_FILES" ]; then
    say "generating the library classes (heic, progressive, interlaced-png, avif: $LIBRARY_FILES files each)"
    mkdir -p "$LIBRARY/heic" "$LIBRARY/progressive" "$LIBRARY/interlaced-png" "$LIBRARY/avif"
    work=$(mktemp -d "${TMPDIR:-/tmp}/viewerd-library.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    mosaic "$work/mosaic.v"
    # noisy IN OUT SEED: IN plus sensor-like noise (sigma 4), back to 8 bits.
    noisy() {
        vips gaussnoise "$work/noise.v" "$(vipsheader -f width "$1")" "$(vipsheader -f height "$1")" --sigma 4 --mean 0 --seed "$3"
        vips add "$1" "$work/noise.v" "$work/sum.v"
        vips cast "$work/sum.v" "$2" uchar
    }
    i=1
    while [ $i -le $LIBRARY_FILES ]; do
        name=$(printf 'photo-%02d' $i)
        # 24 MP, 3:2: a 4680x3120 crop of the 5120x3200 mosaic, scaled to 6000x4000.
        if [ ! -f "$LIBRARY/progressive/$name.jpg" ]; then
            vips crop "$work/mosaic.v" "$work/crop.v" $(( (i - 1) * 60 )) $(( (i - 1) * 10 )) 4680 3120
            vips resize "$work/crop.v" "$work/big.v" 1.2820513
            noisy "$work/big.v" "$work/photo24.v" $i
            vips jpegsave "$work/photo24.v" "$LIBRARY/progressive/.$name.jpg" --Q 90 --interlace --strip
            mv -f "$LIBRARY/progressive/.$name.jpg" "$LIBRARY/progressive/$name.jpg"
        fi
        # 12 MP, 4:3 as phones: a 4160x3120 crop scaled to 4032x3024.
        if [ ! -f "$LIBRARY/heic/$name.heic" ] || [ ! -f "$LIBRARY/avif/$name.avif" ] \
            || [ ! -f "$LIBRARY/interlaced-png/$name.png" ]; then
            vips crop "$work/mosaic.v" "$work/crop.v" $(( (i - 1) * 120 )) $(( (i - 1) * 10 )) 4160 3120
            vips resize "$work/crop.v" "$work/mid.v" 0.96923077
            noisy "$work/mid.v" "$work/photo12.v" $(( 100 + i ))
            if [ ! -f "$LIBRARY/heic/$name.heic" ]; then
                # heif-enc reads JPEG or PNG, not .v. x265's ultrafast preset: 5 s a file instead of 25.
                vips jpegsave "$work/photo12.v" "$work/in.jpg" --Q 95 --strip
                heif-enc -q 50 -t 320 -p preset=ultrafast -o "$LIBRARY/heic/.$name.heic" "$work/in.jpg" >/dev/null
                heif-info "$LIBRARY/heic/.$name.heic" | grep -q 'thumbnail: 320x240' \
                    || { echo "fetch-corpus: $name.heic has no thumbnail item" >&2; exit 1; }
                mv -f "$LIBRARY/heic/.$name.heic" "$LIBRARY/heic/$name.heic"
            fi
            if [ ! -f "$LIBRARY/avif/$name.avif" ]; then
                vips heifsave "$work/photo12.v" "$LIBRARY/avif/.$name.avif" --compression av1 --effort 0 --strip
                mv -f "$LIBRARY/avif/.$name.avif" "$LIBRARY/avif/$name.avif"
            fi
            if [ ! -f "$LIBRARY/interlaced-png/$name.png" ]; then
                vips pngsave "$work/photo12.v" "$LIBRARY/interlaced-png/.$name.png" --interlace --strip
                mv -f "$LIBRARY/interlaced-png/.$name.png" "$LIBRARY/interlaced-png/$name.png"
            fi
        fi
        i=$((i + 1))
    done
    touch "$LIBRARY/.complete-$LIBRARY_FILES"
    rm -rf "$work"
    trap - EXIT
fi
say "library: $(for c in heic progressive interlaced-png avif; do printf '%s %s  ' "$c" "$(ls "$LIBRARY/$c" | wc -l)"; done)"

# 2c. The video clips (the video part, issue 17). Each clip is written under a hidden name
# and renamed; the marker names the version of the list, so a changed list is made afresh.
VIDEO=$CORPUS/video
VIDEO_VERSION=1
if [ ! -f "$VIDEO/.complete-$VIDEO_VERSION" ]; then
    need ffmpeg "apt-get install ffmpeg (make test-deps)"
    need ffprobe "apt-get install ffmpeg (make test-deps)"
    # SVT-AV1 prints its configuration at info level unless told otherwise.
    SVT_LOG=1; export SVT_LOG
    say "generating the video clips with ffmpeg"
    mkdir -p "$VIDEO"
    started=$(date +%s)
    # lavfi_source NAME SIZE RATE SECONDS: a lavfi source graph. mandelbrot's iterations are capped
    # (the default costs seconds a frame at 1080p); life is seeded, so every run is the same.
    lavfi_source() {
        case $1 in
            testsrc2) echo "testsrc2=size=$2:rate=$3:duration=$4" ;;
            mandelbrot) echo "mandelbrot=size=$2:rate=$3:maxiter=160,trim=duration=$4" ;;
            # Cells of 8x8 pixels: one cell a pixel compresses like noise (100 MB for 3 s of 4K).
            life) echo "life=size=$(( ${2%x*} / 8 ))x$(( ${2#*x} / 8 )):rate=$3:seed=17:ratio=0.2:mold=12:life_color=#ffcc40:death_color=#3050a0:mold_color=#204020,scale=$2:flags=neighbor,trim=duration=$4" ;;
        esac
    }
    # clip NAME SOURCE SIZE SECONDS ROTATION AUDIO CODEC-ARGS...: one clip, its video faded in
    # from black over its first 0.6 s, a keyframe each second. AUDIO is an audio codec (a
    # 440 Hz tone as long as the video) or "none". ROTATION (degrees, or 0) is written as the
    # track's display matrix by a stream copy: ffmpeg 5.1 drops the rotate tag when encoding.
    clip() {
        name=$1 src=$2 size=$3 secs=$4 rotation=$5 audio=$6
        shift 6
        [ -f "$VIDEO/$name" ] && return
        rate=30
        case $size in 3840x*) rate=24 ;; esac
        # Both inputs before the codec arguments: an option before an -i belongs to that input.
        if [ "$audio" != none ]; then
            set -- -f lavfi -i "sine=frequency=440:duration=$secs" "$@" -c:a "$audio" -shortest
        fi
        set -- -hide_banner -loglevel error -nostdin -y -f lavfi -i "$(lavfi_source "$src" "$size" "$rate" "$secs")" "$@"
        tmp="$VIDEO/.$name"
        [ "$rotation" = 0 ] || tmp="$VIDEO/.unrotated-$name"
        ffmpeg "$@" -vf "fade=in:st=0:d=0.6,format=yuv420p" -g "$rate" "$tmp"
        if [ "$rotation" != 0 ]; then
            ffmpeg -hide_banner -loglevel error -nostdin -y -i "$tmp" -map 0 -c copy -metadata:s:v:0 rotate="$rotation" "$VIDEO/.$name"
            rm -f "$tmp"
            ffprobe -v error -select_streams v:0 -show_streams "$VIDEO/.$name" | grep -q 'side_data_type=Display Matrix' \
                || { echo "fetch-corpus: $name has no display matrix" >&2; exit 1; }
        fi
        mv -f "$VIDEO/.$name" "$VIDEO/$name"
    }
    X264="-c:v libx264 -preset veryfast -crf 23"
    X265="-c:v libx265 -preset ultrafast -crf 28 -x265-params log-level=error -tag:v hvc1"
    VP9="-c:v libvpx-vp9 -deadline realtime -cpu-used 8 -row-mt 1 -b:v 3M"
    VP8="-c:v libvpx -deadline realtime -cpu-used 8 -b:v 3M"
    AV1="-c:v libsvtav1 -preset 12"
    # shellcheck disable=SC2086 # the codec arguments are meant to split
    video_clips() {
        clip h264-1080p-testsrc2.mp4 testsrc2 1920x1080 5 0 aac $X264
        clip h264-1080p-mandelbrot.mp4 mandelbrot 1920x1080 4 0 aac $X264
        clip h264-1080p-life.mp4 life 1920x1080 4 0 none $X264
        clip h264-720p-testsrc2.mp4 testsrc2 1280x720 5 0 aac $X264
        clip h264-480p-mandelbrot.mp4 mandelbrot 854x480 5 0 aac $X264
        clip hevc-2160p-testsrc2.mp4 testsrc2 3840x2160 3 0 aac $X265
        clip hevc-2160p-life.mp4 life 3840x2160 3 0 none $X265
        clip hevc-1080p-testsrc2.mp4 testsrc2 1920x1080 4 0 aac $X265
        clip phone-h264-1080p-rotate90.mov testsrc2 1920x1080 5 90 aac $X264
        clip phone-h264-1080p-rotate270.mp4 mandelbrot 1920x1080 4 270 aac $X264
        clip phone-hevc-1080p-rotate90.mov life 1920x1080 4 90 aac $X265
        clip vp9-1080p-testsrc2.webm testsrc2 1920x1080 4 0 libopus $VP9
        clip vp9-720p-mandelbrot.webm mandelbrot 1280x720 5 0 none $VP9
        clip vp8-720p-testsrc2.webm testsrc2 1280x720 5 0 libvorbis $VP8
        clip vp8-480p-life.webm life 854x480 5 0 none $VP8
        clip av1-720p-testsrc2.mkv testsrc2 1280x720 4 0 libopus $AV1
        clip av1-480p-mandelbrot.mkv mandelbrot 854x480 4 0 none $AV1
        clip mpeg4-720p-testsrc2.avi testsrc2 1280x720 5 0 libmp3lame -c:v mpeg4 -q:v 4
        clip mpeg4-480p-life.avi life 854x480 5 0 none -c:v mpeg4 -q:v 4
        clip mpeg2-1080p-testsrc2.ts testsrc2 1920x1080 5 0 mp2 -c:v mpeg2video -q:v 4
        clip mpeg2-720p-mandelbrot.ts mandelbrot 1280x720 4 0 none -c:v mpeg2video -q:v 4
    }
    video_clips
    touch "$VIDEO/.complete-$VIDEO_VERSION"
    say "video clips made in $(( $(date +%s) - started )) s"
fi
say "video: $(ls "$VIDEO" | wc -l) clips, $(du -sh "$VIDEO" | cut -f1)"

# 3. The album and the warm folder: the originals cycled, copied under new names.
copies() {  # copies DIR PREFIX OFFSET
    dir=$1; prefix=$2; offset=$3
    if [ -f "$dir/.complete-$COPIES" ]; then
        say "$dir present ($COPIES copies)"
        return
    fi
    mkdir -p "$dir"
    ls "$ORIGINALS" > "$dir/.sources"
    n=$(wc -l < "$dir/.sources")
    say "copying $COPIES files into $dir"
    # One line per copy: source, destination (awk, so 2,000 names cost no 2,000 processes).
    awk -v copies="$COPIES" -v offset="$offset" -v n="$n" -v dir="$dir" -v prefix="$prefix" '
        { src[NR - 1] = $0 }
        END {
            for (i = 0; i < copies; i++) {
                s = src[(i + offset) % n]; ext = s; sub(/.*\./, "", ext)
                printf "%s\t%s/%s-%05d.%s\n", s, dir, prefix, i, ext
            }
        }' "$dir/.sources" | while IFS="$(printf '\t')" read -r src dest; do
        [ -f "$dest" ] || cp "$ORIGINALS/$src" "$dest"
    done
    touch "$dir/.complete-$COPIES"
}
copies "$ROOT/album" photo 0
copies "$ROOT/warm" warm 7
say "done: $ROOT"
