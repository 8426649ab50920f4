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

# 2. The extremes, from four 2560x1600 photographs of the plasma set.
BASE_JPEG=$GENERATED/photo-24mp-baseline.jpg
PROG_JPEG=$GENERATED/photo-24mp-progressive.jpg
BIG_PNG=$GENERATED/photo-50mp.png
if [ ! -f "$BASE_JPEG" ] || [ ! -f "$PROG_JPEG" ] || [ ! -f "$BIG_PNG" ]; then
    say "generating the 24 MP JPEGs and the 50 MP PNG with vips"
    work=$(mktemp -d "${TMPDIR:-/tmp}/viewerd-extremes.XXXXXX")
    trap 'rm -rf "$work"' EXIT
    tiles=""
    for p in Path Autumn ColdRipple FallenLeaf; do
        tiles="$tiles $ORIGINALS/plasma-$p-images-2560x1600.jpg"
    done
    # 2x2 mosaic, 5120x3200, then 6000x4000 (24 MP) with mild noise (sigma 4) like a sensor's.
    vips arrayjoin "${tiles# }" "$work/mosaic.v" --across 2
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
