#!/usr/bin/env bash
# make-hostile-files.sh DIR [--short]
#
# Writes every hostile input of issue 9 into DIR (created if missing) and a manifest,
# DIR/manifest.tsv, that says what viewerd must answer for each. Needs python3 (standard
# library only) and the `vips` command (Debian's libvips-tools). Nothing here is committed:
# the files are made fresh on each run, in a second or two, and the large ones are sparse.
#
# manifest.tsv, one line per request, tab-separated:
#   path        absolute, or relative to DIR
#   expected    comma-separated outcomes that are correct: "result" (a rendition that decodes
#               at the size it claims) or an error code name ("corrupt-image", ...)
#   as-root     the outcomes when the daemon runs as root, or "-" when they are the same
#   note        what the case is
#   requires    (optional) "video": the outcomes are those of a daemon that decodes videos;
#               one that does not answers unsupported-format (make-hostile-videos.sh)
#
# Outcomes "decoder-crashed" and "timeout" are listed where a codec may legitimately fail
# that way on damaged input: the daemon contains them (one job, one worker), and the torture
# run counts them separately so that a codec regression is still visible.
#
# Unreadable files and root: root reads any file whatever its mode, so a mode-000 file, or a
# file in a mode-000 directory, is only unreadable to an unprivileged daemon. The manifest
# gives both answers (column 3); viewerd-torture checks the unprivileged one by running a
# second daemon as `nobody` (setpriv) when it is itself root.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [--short]" >&2
  exit 64
fi
DIR=$1
SHORT=${2:-}
command -v python3 >/dev/null || { echo "$0: python3 is required" >&2; exit 69; }
command -v vips >/dev/null || { echo "$0: the vips command is required (apt-get install libvips-tools)" >&2; exit 69; }

mkdir -p "$DIR"
# A previous run may have left a locked directory behind: unlock before cleaning.
[ -d "$DIR/locked" ] && chmod 0755 "$DIR/locked"
find "$DIR" -mindepth 1 -delete 2>/dev/null || true
mkdir -p "$DIR/base" "$DIR/truncated" "$DIR/flipped" "$DIR/bombs" "$DIR/odd" "$DIR/wrongext"

# 1. Good base images in every format the daemon reads, from one gradient with texture.
python3 - "$DIR/base/source.ppm" <<'EOF'
import sys
w, h = 640, 480
rows = bytearray()
for y in range(h):
    for x in range(w):
        rows += bytes(((x * 255 // (w - 1)), (y * 255 // (h - 1)), ((x ^ y) * 7) & 0xFF))
with open(sys.argv[1], "wb") as f:
    f.write(b"P6\n%d %d\n255\n" % (w, h) + bytes(rows))
EOF
B=$DIR/base
vips copy "$B/source.ppm" "$B/good.jpg[Q=85]"
vips copy "$B/source.ppm" "$B/progressive.jpg[Q=85,interlace]"
vips copy "$B/source.ppm" "$B/good.png"
vips copy "$B/source.ppm" "$B/interlaced.png[interlace]"
vips copy "$B/source.ppm" "$B/lossy.webp[Q=75]"
vips copy "$B/source.ppm" "$B/lossless.webp[lossless]"
vips copy "$B/source.ppm" "$B/good.gif"
vips copy "$B/source.ppm" "$B/good.tif[compression=deflate]"
vips copy "$B/source.ppm" "$B/good.avif[compression=av1,Q=50]" 2>/dev/null || true
vips copy "$B/source.ppm" "$B/good.jxl" 2>/dev/null || true
vips copy "$B/source.ppm" "$B/good.jp2"
rm -f "$B/source.ppm"

# 2. Everything else is written by Python from those bases.
python3 - "$DIR" "$SHORT" <<'EOF'
import os, random, socket, stat, struct, sys, zlib

root, short = sys.argv[1], sys.argv[2] == "--short"
rng = random.Random(9)  # the same files on every run
manifest = []

DAMAGED = "result,corrupt-image,unsupported-format,decoder-crashed,timeout"

def add(path, expected, note, as_root="-"):
    manifest.append((path, expected, as_root, note))

def write(rel, data):
    path = os.path.join(root, rel)
    with open(path, "wb") as f:
        f.write(data)
    return rel

bases = sorted(f for f in os.listdir(os.path.join(root, "base")))
for name in bases:
    add("base/" + name, "result", "a good image (control)")

# Truncated at many offsets: the first bytes only (no loader recognises it), inside the
# header, inside the pixels, one byte short. A truncated image renders what is there or
# is corrupt.
for name in bases:
    data = open(os.path.join(root, "base", name), "rb").read()
    n = len(data)
    cuts = [1, 2, 4, 8, 16, 33, 64, 100, 200, 500, 1000, n // 10, n // 4, n // 2, 3 * n // 4, n - 64, n - 2, n - 1]
    if short:
        cuts = [2, 16, 100, n // 3, n - 1]
    for cut in sorted(set(c for c in cuts if 0 < c < n)):
        stem, ext = os.path.splitext(name)
        add(write("truncated/%s-%d%s" % (stem, cut, ext), data[:cut]), DAMAGED, "truncated at %d of %d bytes" % (cut, n))

# Bit flips: one, a few and many bits, anywhere, and in the first 64 bytes (the header).
for name in bases:
    data = open(os.path.join(root, "base", name), "rb").read()
    variants = 3 if short else 12
    for v in range(variants):
        flipped = bytearray(data)
        count = [1, 4, 64][v % 3]
        header_only = v % 2 == 0
        for _ in range(count):
            i = rng.randrange(min(64, len(flipped)) if header_only else len(flipped))
            flipped[i] ^= 1 << rng.randrange(8)
        stem, ext = os.path.splitext(name)
        add(write("flipped/%s-%d%s" % (stem, v, ext), bytes(flipped)),
            DAMAGED + ",too-large", "%d bit(s) flipped%s" % (count, " in the header" if header_only else ""))

# Zero-length, and non-images with image extensions.
add(write("odd/empty.jpg", b""), "unsupported-format", "zero-length file")
add(write("odd/empty.png", b""), "unsupported-format", "zero-length file")
add(write("odd/text.jpg", b"This is not a JPEG, it is a sentence.\n" * 20), "unsupported-format", "text named .jpg")
add(write("odd/html.png", b"<!doctype html><html><body><img src=x.png></body></html>\n"), "unsupported-format", "HTML named .png")
add(write("odd/json.webp", b'{"width": 100000, "height": 100000}\n'), "unsupported-format", "JSON named .webp")
add(write("odd/random.gif", bytes(rng.randrange(256) for _ in range(4096))), "unsupported-format", "random bytes named .gif")
add(write("odd/zeros.tif", bytes(8192)), "unsupported-format", "zeros named .tif")
add(write("odd/elf.jpg", open("/bin/true", "rb").read()[:65536]), "unsupported-format", "an executable named .jpg")
add(write("odd/magic-only.jpg", b"\xff\xd8\xff"), DAMAGED, "the JPEG magic and nothing else")
add(write("odd/magic-only.png", b"\x89PNG\r\n\x1a\n"), DAMAGED, "the PNG magic and nothing else")
add(write("odd/magic-only.gif", b"GIF89a"), DAMAGED, "the GIF magic and nothing else")
add(write("odd/riff-only.webp", b"RIFF\x04\x00\x00\x00WEBP"), DAMAGED, "an empty RIFF WEBP container")
add(write("odd/svg-text.svg", b"not xml at all <<<"), DAMAGED, "an .svg that is not XML")
add(write("odd/pdf-header.pdf", b"%PDF-1.4\n%%EOF\n"), DAMAGED, "a PDF header and nothing else")
# A sparse 4 GiB file of zeros: costs no disk, must not be read whole nor take the budget.
with open(os.path.join(root, "odd/sparse-4g.jpg"), "wb") as f:
    f.truncate(4 << 30)
# libvips 8.14 sniffs it whole (about 20 s): "timeout" is its documented answer then.
add("odd/sparse-4g.jpg", "unsupported-format", "a sparse 4 GiB file of zeros")

# Images with the wrong extension: the content decides.
for src, dst in [("good.png", "png-named.jpg"), ("good.jpg", "jpeg-named.gif"), ("lossy.webp", "webp-named.png"),
                 ("good.gif", "gif-named.webp"), ("good.tif", "tiff-named.jpg"), ("good.jpg", "jpeg-no-extension")]:
    add(write("wrongext/" + dst, open(os.path.join(root, "base", src), "rb").read()), "result", "%s under a wrong name" % src)

# Decompression bombs: small files whose headers declare huge images.
def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)

def png_bomb(width, height, depth=8, colour=2, interlace=0, idat=None):
    raw = idat if idat is not None else zlib.compress(bytes(1 + width * 3) * 16 if width < 10000 else b"\0" * 64)
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, depth, colour, 0, 0, interlace))
            + png_chunk(b"IDAT", raw) + png_chunk(b"IEND", b""))

BOMB = "too-large,corrupt-image"
# A real zlib stream of zeros that inflates 1000:1, as a bomb would carry.
zeros = zlib.compress(b"\0" * (8 << 20), 9)
add(write("bombs/png-100k.png", png_bomb(100000, 100000, idat=zeros)), BOMB, "PNG declaring 100000x100000")
add(write("bombs/png-max.png", png_bomb(0x7FFFFFFF, 0x7FFFFFFF, 16, 6, 1)), BOMB,
    "PNG declaring 2^31-1 x 2^31-1, 16-bit RGBA, interlaced (cost estimate overflow)")
add(write("bombs/png-u32.png", png_bomb(0xFFFFFFFF, 0xFFFFFFFF, 16, 6, 1)), BOMB,
    "PNG declaring 2^32-1 x 2^32-1 (invalid per the PNG spec), interlaced")
add(write("bombs/png-tall.png", png_bomb(1, 0x7FFFFFFF, idat=zeros)), BOMB, "PNG declaring 1 x 2^31-1")

def patch_jpeg(data, width, height):
    out = bytearray(data)
    i = 2
    while i + 9 < len(out):
        marker = out[i + 1]
        length = (out[i + 2] << 8) | out[i + 3]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            out[i + 5:i + 7] = struct.pack(">H", height)
            out[i + 7:i + 9] = struct.pack(">H", width)
            return bytes(out)
        i += 2 + length
    raise SystemExit("no SOF in the base JPEG")

jpeg = open(os.path.join(root, "base/good.jpg"), "rb").read()
add(write("bombs/jpeg-65500.jpg", patch_jpeg(jpeg, 65500, 65500)), BOMB, "JPEG declaring 65500x65500")
prog = open(os.path.join(root, "base/progressive.jpg"), "rb").read()
add(write("bombs/progressive-65500.jpg", patch_jpeg(prog, 65500, 65500)), BOMB,
    "progressive JPEG declaring 65500x65500 (every coefficient kept)")
# Under the pixel limit but huge for its size: must render (grey) or fail, within the timeout.
add(write("bombs/jpeg-12000.jpg", patch_jpeg(jpeg, 12000, 12000)), "result,corrupt-image,timeout",
    "JPEG declaring 12000x12000 with 640x480 of data")

# Progressive JPEGs damaged where viewerd's own scan parser reads them (jpeg_partial.c copies a
# file without the AC scans a 1/8 thumbnail cannot use): scan headers, segment lengths, a cut
# inside a scan. A clear answer each, never a crashed decoder.
def sos_offsets(data):
    return [i for i in range(len(data) - 1) if data[i] == 0xFF and data[i + 1] == 0xDA]
sos = sos_offsets(prog)
if len(sos) < 3:
    raise SystemExit("the base progressive JPEG has fewer than 3 scans")
def patched(data, at, value):
    out = bytearray(data)
    out[at] = value
    return bytes(out)
PARTIAL = "result,corrupt-image,timeout"
add(write("flipped/prog-scan-count-0.jpg", patched(prog, sos[1] + 4, 0)), PARTIAL, "progressive JPEG: a scan of 0 components")
add(write("flipped/prog-scan-count-9.jpg", patched(prog, sos[1] + 4, 9)), PARTIAL, "progressive JPEG: a scan of 9 components")
add(write("flipped/prog-scan-length.jpg", patched(patched(prog, sos[2] + 2, 0xFF), sos[2] + 3, 0xFF)), PARTIAL,
    "progressive JPEG: a scan header 65535 bytes long")
add(write("flipped/prog-scan-length-1.jpg", patched(patched(prog, sos[2] + 2, 0), sos[2] + 3, 1)), PARTIAL,
    "progressive JPEG: a scan header 1 byte long")
add(write("flipped/prog-spectral.jpg", patched(prog, sos[2] + 6 + 2 * prog[sos[2] + 4], 70)), PARTIAL,
    "progressive JPEG: a scan's spectral end past 63")
add(write("flipped/prog-cut-in-header.jpg", prog[:sos[2] + 5]), PARTIAL, "progressive JPEG cut inside a scan header")
add(write("flipped/prog-cut-mid-scan.jpg", prog[:(sos[1] + sos[2]) // 2]), PARTIAL, "progressive JPEG cut inside a scan")
prog_rng = random.Random(16)
for n in range(4):
    flipped = bytearray(prog)
    for _ in range(24):
        at = prog_rng.randrange(sos[0], len(flipped) - 2)
        flipped[at] = prog_rng.randrange(256)
    add(write(f"flipped/prog-flipped-{n}.jpg", bytes(flipped)), PARTIAL, f"progressive JPEG with 24 random bytes changed ({n})")

gif = bytearray(open(os.path.join(root, "base/good.gif"), "rb").read())
gif[6:10] = struct.pack("<HH", 65535, 65535)
add(write("bombs/gif-screen.gif", bytes(gif)), BOMB + ",result", "GIF logical screen 65535x65535")

def gif_lzw(indices, min_size=2):
    """GIF LZW encoding of palette indices."""
    clear, eoi = 1 << min_size, (1 << min_size) + 1
    size, table, next_code = min_size + 1, {}, eoi + 1
    bits, nbits, out = 0, 0, bytearray()
    def emit(code):
        nonlocal bits, nbits
        bits |= code << nbits
        nbits += size
        while nbits >= 8:
            out.append(bits & 0xFF)
            bits >>= 8
            nbits -= 8
    emit(clear)
    prefix = None
    for k in indices:
        key = (prefix, k)
        if prefix is None:
            prefix = k
        elif key in table:
            prefix = table[key]
        else:
            emit(prefix)
            if next_code < 4096:
                table[key] = next_code
                next_code += 1
                if next_code > (1 << size) and size < 12:
                    size += 1
            else:
                emit(clear)
                table, next_code, size = {}, eoi + 1, min_size + 1
            prefix = k
    if prefix is not None:
        emit(prefix)
    emit(eoi)
    if nbits:
        out.append(bits & 0xFF)
    blocks = bytearray([min_size])
    for i in range(0, len(out), 255):
        chunk = out[i:i + 255]
        blocks += bytes([len(chunk)]) + chunk
    return bytes(blocks + b"\0")

def animated_gif(width, height, frames, frame_side=None):
    """`frames` frames on a width x height screen; each frame covers frame_side^2 pixels
    (the whole screen by default), so a big screen costs little to write."""
    fw = fh = frame_side
    if frame_side is None:
        fw, fh = width, height
    palette = bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255])
    out = bytearray(b"GIF89a" + struct.pack("<HHBBB", width, height, 0xF1, 0, 0) + palette)
    out += b"\x21\xFF\x0BNETSCAPE2.0\x03\x01\x00\x00\x00"
    encoded = [gif_lzw([(x // 8 + y // 8 + f) % 4 for y in range(fh) for x in range(fw)]) for f in range(4)]
    for f in range(frames):
        out += b"\x21\xF9\x04\x04\x01\x00\x00\x00"  # 10 ms, no transparency
        out += b"\x2C" + struct.pack("<HHHHB", (f * 7) % max(1, width - fw + 1), 0, fw, fh, 0)
        out += encoded[f % 4]
    return bytes(out + b"\x3B")

frames = 600 if short else 5000
add(write("bombs/animated-%d.gif" % frames, animated_gif(32, 32, frames)), "result,too-large",
    "animated GIF, %d frames of 32x32" % frames)
add(write("bombs/animated-over.gif", animated_gif(256, 256, 4000, frame_side=8)), "too-large,result",
    "animated GIF, 4000 frames on a 256x256 screen: pages count against the limit")

def webp_chunks(data):
    """(fourcc, offset of the chunk's data) of each chunk of a RIFF WEBP file."""
    i, found = 12, []
    while i + 8 <= len(data):
        size = struct.unpack("<I", data[i + 4:i + 8])[0]
        found.append((data[i:i + 4], i + 8))
        i += 8 + size + (size & 1)
    return found

def patch_webp(path, fourcc, patch):
    data = bytearray(open(path, "rb").read())
    for kind, at in webp_chunks(data):
        if kind == fourcc:
            patch(data, at)
            return bytes(data)
    raise SystemExit("no %r chunk in %s" % (fourcc, path))

def vp8x_canvas(data, at):
    data[at + 4:at + 7] = (0xFFFFFF).to_bytes(3, "little")
    data[at + 7:at + 10] = (0xFFFFFF).to_bytes(3, "little")

def vp8l_size(data, at):  # signature 0x2f, then 14 bits width-1, 14 bits height-1
    bits = struct.unpack("<I", data[at + 1:at + 5])[0]
    data[at + 1:at + 5] = struct.pack("<I", (bits & ~0xFFFFFFF) | 16383 | (16383 << 14))

def vp8_size(data, at):  # 3-byte frame tag, start code 9d 01 2a, then 14-bit sides
    data[at + 6:at + 10] = struct.pack("<HH", 16383, 16383)

lossless, lossy = os.path.join(root, "base/lossless.webp"), os.path.join(root, "base/lossy.webp")
add(write("bombs/webp-vp8x.webp", patch_webp(lossless, b"VP8X", vp8x_canvas)), BOMB,
    "WebP VP8X canvas 16777216x16777216")
add(write("bombs/webp-vp8l.webp", patch_webp(lossless, b"VP8L", vp8l_size)), BOMB,
    "lossless WebP declaring 16384x16384")
add(write("bombs/webp-vp8.webp", patch_webp(lossy, b"VP8 ", vp8_size)), BOMB, "lossy WebP declaring 16383x16383")

add(write("bombs/svg-viewbox.svg",
          b'<svg xmlns="http://www.w3.org/2000/svg" width="1000000" height="1000000" viewBox="0 0 1000000 1000000">'
          b'<rect width="1000000" height="1000000" fill="red"/></svg>'), BOMB, "SVG 1000000x1000000")
add(write("bombs/svg-viewbox-only.svg",
          b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 100000000 100000000">'
          b'<circle cx="50000000" cy="50000000" r="40000000" fill="blue"/></svg>'), BOMB + ",result",
    "SVG with a 10^8 viewBox and no size")
depth = 2000 if short else 20000
add(write("bombs/svg-nested.svg",
          b'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100">' + b"<g>" * depth
          + b'<rect width="10" height="10"/>' + b"</g>" * depth + b"</svg>"), "result,corrupt-image,unsupported-format,timeout",
    "SVG nested %d groups deep" % depth)
uses = b"".join(b'<g id="l%d"><use href="#l%d"/><use href="#l%d"/><use href="#l%d"/><use href="#l%d"/></g>'
                % (i, i - 1, i - 1, i - 1, i - 1) for i in range(1, 16))
add(write("bombs/svg-use-bomb.svg",
          b'<svg xmlns="http://www.w3.org/2000/svg" width="100" height="100"><defs><rect id="l0" width="1" height="1"/>'
          + uses + b'</defs><use href="#l15"/></svg>'), "result,corrupt-image,unsupported-format,timeout",
    "SVG <use> fan-out, 4^15 instances")
add(write("bombs/svg-entities.svg",
          b'<?xml version="1.0"?><!DOCTYPE svg [<!ENTITY a "aaaaaaaaaa">' +
          b"".join(b'<!ENTITY %s "%s">' % (chr(98 + i).encode(), (b"&" + chr(97 + i).encode() + b";") * 10) for i in range(9)) +
          b']><svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><text>&j;</text></svg>'),
    "result,corrupt-image,unsupported-format,timeout", "SVG billion-laughs entities")

def pdf(mediabox):
    objs = [b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [%s] >>" % mediabox]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (i + 1, o)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
    for off in offsets:
        out += b"%010d 00000 n \n" % off
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, xref)
    return bytes(out)

add(write("bombs/pdf-mediabox.pdf", pdf(b"0 0 10000000 10000000")), BOMB + ",unsupported-format",
    "PDF with a 10^7 pt media box")
add(write("bombs/pdf-small.pdf", pdf(b"0 0 200 100")), "result,unsupported-format", "a small valid PDF page (control)")

# Not regular files.
os.mkdir(os.path.join(root, "odd/directory.jpg"))
add("odd/directory.jpg", "not-regular-file", "a directory")
os.mkfifo(os.path.join(root, "odd/fifo.jpg"))
add("odd/fifo.jpg", "not-regular-file", "a FIFO nobody writes to (must not block)")
os.symlink("/dev/zero", os.path.join(root, "odd/devzero.jpg"))
add("odd/devzero.jpg", "not-regular-file", "a symlink to /dev/zero")
add("/dev/zero", "not-regular-file", "/dev/zero by path")
add("/dev/null", "not-regular-file", "/dev/null by path")
os.symlink("loop-b.jpg", os.path.join(root, "odd/loop-a.jpg"))
os.symlink("loop-a.jpg", os.path.join(root, "odd/loop-b.jpg"))
add("odd/loop-a.jpg", "not-regular-file", "a symlink loop")
os.symlink("does-not-exist.jpg", os.path.join(root, "odd/dangling.jpg"))
add("odd/dangling.jpg", "not-found", "a dangling symlink")
add("odd/missing.jpg", "not-found", "no such file")
add("base/good.jpg/inside.jpg", "not-found", "a path through a regular file (ENOTDIR)")
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(os.path.join(root, "odd/socket.jpg"))
s.close()
add("odd/socket.jpg", "not-regular-file", "a Unix socket file")
good = open(os.path.join(root, "base/good.jpg"), "rb").read()
write("odd/unreadable.jpg", good)
os.chmod(os.path.join(root, "odd/unreadable.jpg"), 0)
add("odd/unreadable.jpg", "permission-denied", "a good JPEG with mode 000", as_root="result")
os.mkdir(os.path.join(root, "locked"))
write("locked/inside.jpg", good)
os.chmod(os.path.join(root, "locked"), 0)
add("locked/inside.jpg", "permission-denied", "a good JPEG in a mode-000 directory", as_root="result")
add("/proc/version", "unsupported-format", "a /proc file: regular, size 0, content on read")

with open(os.path.join(root, "manifest.tsv"), "w") as f:
    f.write("# path\texpected\tas-root\tnote\n")
    for row in manifest:
        f.write("\t".join(row) + "\n")
print("make-hostile-files: %d cases in %s" % (len(manifest), root))
EOF

# 3. The hostile videos of issue 17 (appended to the manifest; skipped without ffmpeg).
"$(dirname "$0")/make-hostile-videos.sh" "$DIR" $SHORT
# 4. The hostile JPEG 2000 files of issue 31 (appended to the manifest).
"$(dirname "$0")/make-hostile-jp2.sh" "$DIR"
