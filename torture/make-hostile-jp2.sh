#!/usr/bin/env bash
# make-hostile-jp2.sh DIR
#
# The hostile JPEG 2000 files of issue 31, written into DIR/jp2 and appended to
# DIR/manifest.tsv (see make-hostile-files.sh, which runs this after writing the manifest; its
# base/good.jp2 gets the truncations and bit flips every base image gets). Needs python3 and
# the `vips` command. Each case must be answered by a clear error (or, for a cut file, what
# was there), and the daemon goes on: a lying SIZ and absurd tile counts are refused from the
# header, before any worker reads them (docs/RENDERING.md, "JPEG 2000").
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR" >&2
  exit 64
fi
DIR=$1
[ -f "$DIR/manifest.tsv" ] || { echo "$0: run make-hostile-files.sh first (no $DIR/manifest.tsv)" >&2; exit 1; }
J=$DIR/jp2
rm -rf "$J"
mkdir -p "$J"
vips black "$J/black.v" 640 480 --bands 3
vips linear "$J/black.v" "$J/grey.v" 1 96 --uchar
vips copy "$J/grey.v" "$J/good.jp2"
rm -f "$J/black.v" "$J/grey.v"

python3 - "$DIR" <<'EOF'
import os, struct, sys

root = sys.argv[1]
jp2 = open(os.path.join(root, "jp2/good.jp2"), "rb").read()
soc = jp2.find(b"\xff\x4f\xff\x51")
if soc < 0:
    raise SystemExit("make-hostile-jp2: no codestream in good.jp2")
j2k = jp2[soc:]
rows = []

def add(name, data, expected, note):
    with open(os.path.join(root, "jp2", name), "wb") as f:
        f.write(data)
    rows.append(("jp2/" + name, expected, "-", note))

FIELDS = ["X", "Y", "XO", "YO", "XT", "YT", "XTO", "YTO"]

def siz(data, at, **fields):
    """`data` with SIZ's 32-bit fields (Xsiz ...) changed; `at`: where its codestream starts."""
    out = bytearray(data)
    for name, value in fields.items():
        o = at + 8 + 4 * FIELDS.index(name)
        out[o:o + 4] = struct.pack(">I", value)
    return bytes(out)

add("good.j2k", j2k, "result", "a raw J2K codestream (control)")
for cut in (2, 40, 200, len(j2k) // 2, len(j2k) - 2):
    add("cut-%d.j2k" % cut, j2k[:cut], "result,corrupt-image,unsupported-format", "J2K codestream cut at %d of %d bytes" % (cut, len(j2k)))
for cut in (60, soc + 50, len(jp2) // 2):
    add("cut-%d.jp2" % cut, jp2[:cut], "result,corrupt-image,unsupported-format", "JP2 cut at %d of %d bytes" % (cut, len(jp2)))

# A lying SIZ: sides far past the pixel limit, refused from the header by the daemon.
add("siz-huge.j2k", siz(j2k, 0, X=0xFFFFFFFF, Y=0xFFFFFFFF), "too-large", "J2K SIZ declaring 2^32-1 x 2^32-1")
add("siz-huge.jp2", siz(jp2, soc, X=0xFFFFFFFF, Y=0xFFFFFFFF), "too-large", "JP2 SIZ declaring 2^32-1 x 2^32-1 (the ihdr says 640x480)")
add("siz-60000.j2k", siz(j2k, 0, X=60000, Y=60000), "too-large", "J2K SIZ declaring 60000x60000 over 640x480 of data")
# Under the limit, but not what the data is: OpenJPEG decodes what is there or refuses.
add("siz-12000.j2k", siz(j2k, 0, X=12000, Y=12000), "result,corrupt-image", "J2K SIZ declaring 12000x12000 over 640x480 of data")
add("siz-ihdr.jp2", siz(jp2, soc, X=1280, Y=960), "corrupt-image", "JP2 whose SIZ (1280x960) disagrees with its ihdr (640x480)")
add("siz-offset.j2k", siz(j2k, 0, XO=700), "corrupt-image", "J2K SIZ whose image offset lies past its width")
add("siz-tile-0.j2k", siz(j2k, 0, XT=0, YT=0), "corrupt-image", "J2K SIZ with tiles of 0x0")
# Absurd tile counts: 3x3-pixel tiles are 34,240 tiles (OpenJPEG: 440 MB and 6 s a header
# read), 1x1 are 307,200 (past the standard's 65,535); refused from the header.
add("tiles-3.j2k", siz(j2k, 0, XT=3, YT=3), "too-large", "J2K of 34240 tiles of 3x3 pixels")
add("tiles-3.jp2", siz(jp2, soc, XT=3, YT=3), "too-large", "JP2 of 34240 tiles of 3x3 pixels")
add("tiles-1.j2k", siz(j2k, 0, XT=1, YT=1), "too-large", "J2K of 307200 tiles of 1 pixel")
add("tiles-40.j2k", siz(j2k, 0, XT=40, YT=40), "result,corrupt-image", "J2K of 192 tiles of 40x40 (the data is of 2 tiles)")
# Components: none, and the most Csiz allows, with a SIZ length that does not hold them.
none = bytearray(j2k); none[40:42] = b"\0\0"
add("components-0.j2k", bytes(none), "corrupt-image", "J2K SIZ of 0 components")
many = bytearray(j2k); many[40:42] = struct.pack(">H", 16384)
add("components-16384.j2k", bytes(many), "corrupt-image", "J2K SIZ of 16384 components in a 47-byte segment")
# COD: decomposition levels past the 32 the standard allows.
cod = j2k.find(b"\xff\x52")
levels = bytearray(j2k); levels[cod + 9] = 255
add("cod-levels-255.j2k", bytes(levels), "corrupt-image", "J2K COD of 255 decomposition levels")
# Boxes: a codestream box claiming 4 GiB, a header box past the file.
jp2c = jp2.find(b"jp2c")
long_box = bytearray(jp2); long_box[jp2c - 4:jp2c] = b"\xff\xff\xff\xff"
add("jp2c-4g.jp2", bytes(long_box), "result,corrupt-image", "JP2 whose codestream box claims 4 GiB")
jp2h = jp2.find(b"jp2h")
header_box = bytearray(jp2); header_box[jp2h - 4:jp2h] = b"\x7f\xff\xff\xff"
add("jp2h-past-end.jp2", bytes(header_box), "corrupt-image,unsupported-format", "JP2 whose header box runs past the file")

with open(os.path.join(root, "manifest.tsv"), "a") as f:
    for row in rows:
        f.write("\t".join(row) + "\n")
print("make-hostile-jp2: %d cases in %s/jp2" % (len(rows), root))
EOF
