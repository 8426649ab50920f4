#!/usr/bin/env bash
# make-hostile-videos.sh DIR [--short]
#
# The hostile videos of issue 17, written into DIR/video and appended to DIR/manifest.tsv (see
# make-hostile-files.sh, which runs this after writing the manifest). Needs ffmpeg (Debian's
# ffmpeg package: make test-deps) and python3; without ffmpeg it says so and adds nothing.
#
# Every line written here has a fifth column, "video": the outcomes listed are those of a
# daemon that decodes videos. viewerd-torture asks for a good clip first, and when the daemon
# answers it `unsupported-format` (no video support built in), it adds that answer to every
# "video" line instead of failing them all.
#
# The clips are 320x256, 2 s, made from testsrc2 fading in from black, a keyframe each half
# second; about five seconds on two cores.
set -euo pipefail

if [ $# -lt 1 ]; then
  echo "usage: $0 DIR [--short]" >&2
  exit 64
fi
DIR=$1
SHORT=${2:-}
if ! command -v ffmpeg >/dev/null; then
  echo "make-hostile-videos: no ffmpeg command: the hostile videos are left out (make test-deps installs it)"
  exit 0
fi
[ -f "$DIR/manifest.tsv" ] || { echo "$0: run make-hostile-files.sh first (no $DIR/manifest.tsv)" >&2; exit 1; }

V=$DIR/video
rm -rf "$V"
mkdir -p "$V/base" "$V/made"
export SVT_LOG=1  # SVT-AV1 prints its configuration at info level otherwise
gen() { ffmpeg -hide_banner -loglevel error -nostdin -y "$@"; }
SRC="testsrc2=size=320x256:rate=30:duration=2"
VF="fade=in:st=0:d=0.5,format=yuv420p"
X264=(-c:v libx264 -preset veryfast -g 15)

# 1. Good clips of every container and codec (the controls, and what the rest is made from).
gen -f lavfi -i "$SRC" -f lavfi -i "sine=duration=2" -vf "$VF" "${X264[@]}" -c:a aac -shortest "$V/base/h264.mp4"
gen -f lavfi -i "$SRC" -f lavfi -i "sine=duration=2" -vf "$VF" -c:v libx265 -preset ultrafast -x265-params log-level=error \
  -tag:v hvc1 -g 15 -c:a aac -shortest "$V/base/hevc.mp4"
gen -f lavfi -i "$SRC" -vf "$VF" "${X264[@]}" "$V/made/h264-video-only.mp4"
# ffmpeg 5.1 writes the rotate tag as a display matrix only on a stream copy.
gen -i "$V/made/h264-video-only.mp4" -c copy -metadata:s:v:0 rotate=90 "$V/base/rotate90.mov"
gen -f lavfi -i "$SRC" -vf "$VF" -c:v libvpx-vp9 -deadline realtime -cpu-used 8 -g 15 "$V/base/vp9.webm"
gen -f lavfi -i "$SRC" -vf "$VF" -c:v libvpx -deadline realtime -cpu-used 8 -g 15 "$V/base/vp8.webm"
gen -f lavfi -i "$SRC" -vf "$VF" -c:v libsvtav1 -preset 12 -g 15 "$V/base/av1.mkv"
gen -f lavfi -i "$SRC" -vf "$VF" "${X264[@]}" "$V/base/h264.mkv"
gen -f lavfi -i "$SRC" -vf "$VF" -c:v mpeg4 -q:v 4 -g 15 "$V/base/mpeg4.avi"
gen -f lavfi -i "$SRC" -f lavfi -i "sine=duration=2" -vf "$VF" -c:v mpeg2video -q:v 4 -g 15 -c:a mp2 -shortest "$V/base/mpeg2.ts"
gen -i "$V/base/h264.mp4" -c copy -movflags +faststart "$V/made/h264-faststart.mp4"
# An AVI with uncompressed audio (its idx1 is what FFmpeg's AVI index rebuilds from).
gen -f lavfi -i "$SRC" -f lavfi -i "sine=duration=2:sample_rate=8000" -vf "$VF" -c:v mpeg4 -q:v 4 -g 15 -c:a pcm_u8 -ac 1 \
  -shortest "$V/made/pcm.avi"
# Audio only.
gen -f lavfi -i "sine=duration=2" -c:a aac "$V/made/audio.m4a"
gen -f lavfi -i "sine=duration=2" -c:a libopus "$V/made/audio.mka"
gen -f lavfi -i "sine=duration=2" -c:a aac -f mp4 "$V/made/audio-only.mp4"

# 2. The hostile files, from those, and the manifest lines.
python3 - "$DIR" "$SHORT" <<'EOF'
import os, random, struct, sys

root, short = sys.argv[1], sys.argv[2] == "--short"
V = os.path.join(root, "video")
rng = random.Random(17)  # the same files on every run
manifest = []

# A clip damaged at random may still render, or fail in any of these ways (as damaged images).
DAMAGED = "result,corrupt-image,unsupported-format,decoder-crashed,timeout,too-large"
CLEAR = "corrupt-image,unsupported-format"

def add(rel, expected, note):
    manifest.append(("video/" + rel, expected, "-", note, "video"))

def read(rel):
    with open(os.path.join(V, rel), "rb") as f:
        return f.read()

def write(rel, data):
    path = os.path.join(V, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return rel

bases = sorted(os.listdir(os.path.join(V, "base")))
for name in bases:
    add("base/" + name, "result", "a good clip (control)")

# --- MP4 boxes -------------------------------------------------------------------------------
def boxes(data):
    """(type, offset, size) of the boxes at one level."""
    i, out = 0, []
    while i + 8 <= len(data):
        size, kind = struct.unpack(">I4s", data[i:i + 8])
        if size < 8:
            break
        out.append((kind, i, size))
        i += size
    return out

# Bytes before the child boxes of a box that holds both fields and boxes.
PREFIX = {b"stsd": 8, b"avc1": 78, b"hvc1": 78}

def edit(data, path, change):
    """`data` with the payload of every box at `path` (a list of types) replaced by
    change(payload), every enclosing box's size updated."""
    out, end = bytearray(), 0
    for kind, at, size in boxes(data):
        body = data[at + 8:at + size]
        if kind == path[0]:
            if len(path) == 1:
                body = change(bytearray(body))
            else:
                k = PREFIX.get(kind, 0)
                body = body[:k] + edit(body[k:], path[1:], change)
        out += struct.pack(">I4s", 8 + len(body), kind) + body
        end = at + size
    return bytes(out + data[end:])

def top(data, kind):
    return next((at, size) for k, at, size in boxes(data) if k == kind)

STBL = [b"moov", b"trak", b"mdia", b"minf", b"stbl"]

# --- H.264 sequence parameter set ------------------------------------------------------------
def unescape(ebsp):
    out, zeros = bytearray(), 0
    for b in ebsp:
        if zeros >= 2 and b == 3:
            zeros = 0
            continue
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)

def escape(rbsp):
    out, zeros = bytearray(), 0
    for b in rbsp:
        if zeros >= 2 and b <= 3:
            out.append(3)
            zeros = 0
        out.append(b)
        zeros = zeros + 1 if b == 0 else 0
    return bytes(out)

def sps_with_size(nal, mbs_wide, mbs_high):
    """An SPS NAL unit (header byte included) declaring mbs_wide x mbs_high macroblocks,
    everything else as it was (frame_mbs_only, no cropping: x264's progressive output)."""
    bits = "".join("{:08b}".format(b) for b in unescape(nal[1:]))
    pos = 0
    def u(n):
        nonlocal pos
        v = int(bits[pos:pos + n], 2) if n else 0
        pos += n
        return v
    def ue():
        nonlocal pos
        zeros = 0
        while bits[pos] == "0":
            zeros += 1
            pos += 1
        pos += 1
        return (1 << zeros) - 1 + u(zeros)
    profile = u(8); u(8); u(8); ue()
    if profile in (100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135):
        if ue() == 3:
            u(1)
        ue(); ue(); u(1)
        if u(1):
            raise SystemExit("make-hostile-videos: the SPS has scaling matrices")
    ue()
    poc = ue()
    if poc == 0:
        ue()
    elif poc == 1:
        raise SystemExit("make-hostile-videos: the SPS has pic_order_cnt_type 1")
    ue(); u(1)
    start = pos
    ue(); ue()
    end = pos
    def code(v):
        b = bin(v + 1)[2:]
        return "0" * (len(b) - 1) + b
    rest = (bits[:start] + code(mbs_wide - 1) + code(mbs_high - 1) + bits[end:]).rstrip("0")
    assert rest.endswith("1")  # the stop bit
    rest += "0" * (-len(rest) % 8)
    return nal[:1] + escape(bytes(int(rest[i:i + 8], 2) for i in range(0, len(rest), 8)))

def avcc_with_size(avcc, mbs_wide, mbs_high):
    out = bytearray(avcc[:6])
    count, i = avcc[5] & 0x1F, 6
    for _ in range(count):
        n = struct.unpack(">H", avcc[i:i + 2])[0]
        sps = sps_with_size(avcc[i + 2:i + 2 + n], mbs_wide, mbs_high)
        out += struct.pack(">H", len(sps)) + sps
        i += 2 + n
    return bytes(out + avcc[i:])

def sample_entry_size(width, height):
    def change(body):
        body[24:28] = struct.pack(">HH", width, height)
        return bytes(body)
    return change

def tkhd_size(width, height):
    def change(body):
        if body[-8:] != bytes(8):  # the video track's; the audio track's is 0x0
            body[-8:] = struct.pack(">II", width << 16, height << 16)
        return bytes(body)
    return change

# --- Matroska elements -----------------------------------------------------------------------
def vint_length(first):
    return 9 - first.bit_length()

def unknown_sizes(data, element_id):
    """Every `element_id` element's size set to "unknown" (all value bits set), in place."""
    out, found, i = bytearray(data), 0, 0
    while True:
        i = out.find(element_id, i)
        if i < 0:
            break
        at = i + len(element_id)
        n = vint_length(out[at])
        out[at:at + n] = bytes([0xFF >> (n - 1)]) + b"\xFF" * (n - 1)
        found += 1
        i = at + n
    if not found:
        raise SystemExit("make-hostile-videos: no %r element" % element_id)
    return bytes(out)

def replace_once(data, old, new):
    if old not in data or len(old) != len(new):
        raise SystemExit("make-hostile-videos: %r not found" % old)
    return data.replace(old, new, 1)

# 1. Truncated MP4s.
mp4 = read("base/h264.mp4")
moov_at, moov_size = top(mp4, b"moov")
add(write("truncated/no-moov.mp4", mp4[:moov_at]), CLEAR, "MP4 cut before its moov atom (moov at the end)")
fast = read("made/h264-faststart.mp4")
fmoov_at, fmoov_size = top(fast, b"moov")
add(write("truncated/in-moov.mp4", fast[:fmoov_at + fmoov_size // 2]), CLEAR, "MP4 cut inside its moov atom (moov first)")
add(write("truncated/ftyp-only.mp4", mp4[:top(mp4, b"ftyp")[1]]), CLEAR, "an MP4's ftyp box and nothing else")
mdat_at, mdat_size = top(fast, b"mdat")
add(write("truncated/mdat-half.mp4", fast[:mdat_at + mdat_size // 2]), "result,corrupt-image",
    "MP4 cut halfway through its samples (moov first, its later samples missing)")

# 2. Audio only.
add(write("audio/audio.m4a", read("made/audio.m4a")), CLEAR, "AAC audio only (M4A)")
add(write("audio/audio.mka", read("made/audio.mka")), CLEAR, "Opus audio only (Matroska)")
add(write("audio/audio-only.mp4", read("made/audio-only.mp4")), CLEAR, "AAC audio only, named .mp4")

# 3. Zero-length.
for name in ("empty.mp4", "empty.mov", "empty.mkv", "empty.webm"):
    add(write("odd/" + name, b""), "unsupported-format", "zero-length file named ." + name.split(".")[1])

# 4. A codec nobody knows.
mkv = read("base/h264.mkv")
add(write("codec/mkv-codec-id.mkv", replace_once(mkv, b"V_MPEG4/ISO/AVC", b"V_XYZZY/ISO/AVC")), CLEAR,
    "Matroska track with codec id V_XYZZY/ISO/AVC")
def fourcc(body):
    body[12:16] = b"zzzz"
    return bytes(body)
add(write("codec/mp4-fourcc.mp4", edit(mp4, STBL + [b"stsd"], fourcc)), CLEAR, "MP4 sample entry 'zzzz' instead of 'avc1'")
avi = read("base/mpeg4.avi")
if b"FMP4" not in avi:
    raise SystemExit("make-hostile-videos: no FMP4 tag in the AVI")
add(write("codec/avi-fourcc.avi", avi.replace(b"FMP4", b"QQQQ")), CLEAR, "AVI with stream handler and compression QQQQ")

# 5. 16384x16384 frames declared.
only = read("made/h264-video-only.mp4")
big = edit(edit(only, [b"moov", b"trak", b"tkhd"], tkhd_size(16384, 16384)), STBL + [b"stsd", b"avc1"], sample_entry_size(16384, 16384))
add(write("big/container-16k.mp4", big), "too-large,corrupt-image,result",
    "MP4 whose track header and sample entry say 16384x16384, its SPS 320x256")
big_sps = edit(big, STBL + [b"stsd", b"avc1", b"avcC"], lambda body: avcc_with_size(bytes(body), 1024, 1024))
# FFmpeg itself refuses 16384x16384 ("Picture size 16384x16384 is invalid": av_image_check_size
# wants (w + 128) * (h + 128) * 8 < 2^31); 16000x16000 it accepts, so only viewerd's limit stands.
add(write("big/sps-16k.mp4", big_sps), "too-large,corrupt-image",
    "MP4 whose SPS, track header and sample entry say 16384x16384 (1024x1024 macroblocks; FFmpeg refuses the size)")
big16000 = edit(edit(only, [b"moov", b"trak", b"tkhd"], tkhd_size(16000, 16000)), STBL + [b"stsd", b"avc1"], sample_entry_size(16000, 16000))
# 16000x16000 is exactly viewerd's default pixel limit for photos (256,000,000), far over the
# 8192x8192 a video's frame may be: too-large at once, not a decode to the timeout.
add(write("big/sps-16000.mp4", edit(big16000, STBL + [b"stsd", b"avc1", b"avcC"], lambda body: avcc_with_size(bytes(body), 1000, 1000))),
    "too-large",
    "MP4 whose SPS, track header and sample entry say 16000x16000 (FFmpeg accepts the size; viewerd's pixel limit exactly)")
add(write("big/mkv-pixels-16k.mkv", replace_once(replace_once(mkv, b"\xb0\x82\x01\x40", b"\xb0\x82\x40\x00"),
                                                  b"\xba\x82\x01\x00", b"\xba\x82\x40\x00")),
    "too-large,corrupt-image,result", "Matroska PixelWidth and PixelHeight 16384, its SPS 320x256")
# Sides no Int holds: 8-byte EBML values of 2^63 and 2^33 (a trap in the daemon's sniffer and
# its pixel count, found in review), in a Matroska of nothing else.
def ebml(element_id, payload):
    return element_id + bytes([0x80 | len(payload)]) + payload
for name, side in (("mkv-side-2e63", 1 << 63), ("mkv-side-2e33", 1 << 33)):
    eight = side.to_bytes(8, "big")
    tracks = ebml(b"\x16\x54\xae\x6b", ebml(b"\xae", ebml(b"\xe0", ebml(b"\xb0", eight) + ebml(b"\xba", eight))))
    header = ebml(b"\x1a\x45\xdf\xa3", ebml(b"\x42\x82", b"matroska"))
    add(write("big/" + name + ".mkv", header + b"\x18\x53\x80\x67\x01\xff\xff\xff\xff\xff\xff\xff" + tracks),
        "too-large,corrupt-image,unsupported-format", "Matroska header alone, PixelWidth and PixelHeight of 2^%d" % (side.bit_length() - 1))

# 6. Demuxers made to loop or search.
def null_packet():
    return b"\x47\x1f\xff\x10" + b"\xff" * 184
ts = read("base/mpeg2.ts")
packets = [ts[i:i + 188] for i in range(0, len(ts) - 187, 188)]
def pid(p):
    return ((p[1] & 0x1F) << 8) | p[2]
pmt = {0x1000, 0x0011}  # ffmpeg's PMT and SDT
add(write("loop/ts-no-pat.ts", b"".join(null_packet() if pid(p) == 0 or pid(p) in pmt else p for p in packets)),
    "result,corrupt-image,unsupported-format", "MPEG-TS without its PAT, PMT and SDT")
null_mib = 4 if short else 24
add(write("loop/ts-null-%dm.ts" % null_mib, null_packet() * (null_mib * 1024 * 1024 // 188)), CLEAR,
    "%d MiB of MPEG-TS null packets (a demuxer searching for a PAT)" % null_mib)
add(write("loop/ts-null-then-clip.ts", null_packet() * (null_mib * 1024 * 1024 // 188) + ts),
    "result,corrupt-image,unsupported-format", "%d MiB of MPEG-TS null packets, then a clip" % null_mib)
frees = 20000 if short else 200000
add(write("loop/mp4-free-chain.mp4", mp4[:moov_at] + b"\x00\x00\x00\x08free" * frees + mp4[moov_at:]),
    "result,corrupt-image,unsupported-format", "MP4 with %d empty free boxes between mdat and moov" % frees)
def oversize_trak(body):
    trak_at, trak_size = next((at, size) for k, at, size in boxes(bytes(body)) if k == b"trak")
    body[trak_at:trak_at + 4] = struct.pack(">I", len(body) * 4)
    return bytes(body)
moov_body = bytearray(mp4[moov_at + 8:moov_at + moov_size])
add(write("loop/mp4-trak-past-moov.mp4", mp4[:moov_at + 8] + oversize_trak(moov_body)), CLEAR + ",result",
    "MP4 whose first trak box claims four times its moov's size")
def zero_sizes(body):
    for k, at, size in boxes(bytes(body)):
        if k == b"trak":
            body[at:at + 4] = b"\x00\x00\x00\x00"
    return bytes(body)
add(write("loop/mp4-trak-size-0.mp4", mp4[:moov_at + 8] + zero_sizes(bytearray(moov_body))), CLEAR + ",result",
    "MP4 whose trak boxes have size 0 (to the end of their parent)")
add(write("loop/mkv-clusters-unknown-size.mkv", unknown_sizes(mkv, b"\x1f\x43\xb6\x75")), "result,corrupt-image,unsupported-format",
    "Matroska whose clusters all have unknown sizes")
add(write("loop/mkv-segment-unknown-size.mkv", unknown_sizes(unknown_sizes(mkv, b"\x18\x53\x80\x67"), b"\x1f\x43\xb6\x75")),
    "result,corrupt-image,unsupported-format", "Matroska whose segment and clusters have unknown sizes")
def seekhead_to_itself(data):
    seg = data.find(b"\x18\x53\x80\x67")
    seg_data = seg + 4 + vint_length(data[seg + 4])
    head = data.find(b"\x11\x4d\x9b\x74", seg_data)
    seek_id = data.find(b"\x53\xab\x84", head)
    position = data.find(b"\x53\xac", head)
    if min(seg, head, seek_id, position) < 0:
        raise SystemExit("make-hostile-videos: no SeekHead to patch")
    out = bytearray(data)
    out[seek_id + 3:seek_id + 7] = b"\x11\x4d\x9b\x74"
    n = out[position + 2] & 0x0F if out[position + 2] >= 0x80 else 0
    if not n:
        raise SystemExit("make-hostile-videos: unexpected SeekPosition size")
    out[position + 3:position + 3 + n] = (head - seg_data).to_bytes(n, "big")
    return bytes(out)
add(write("loop/mkv-seekhead-itself.mkv", seekhead_to_itself(mkv)), "result,corrupt-image,unsupported-format",
    "Matroska whose SeekHead points at itself")

# 7. Indexes that claim far more than the file holds (issue 29, review #3): FFmpeg builds a
#    24-byte entry for each claimed sample, Cue or index piece. viewerd-torture asks for each
#    of video/index/ alone too and reports the largest growth of a worker (twice a video's
#    admission estimate at most).
def claim_samples(n):
    """Every track's sample tables claiming n samples: stsz a constant size 1 and count n,
    one stsc run of n samples a chunk, one stts entry of n (the review's 12.7 KB file)."""
    def stsz(body):
        body[4:12] = struct.pack(">II", 1, n)
        return body
    def stsc(body):
        body[4:8] = struct.pack(">I", 1)
        body[12:16] = struct.pack(">I", n)
        return body
    def stts(body):
        body[4:12] = struct.pack(">II", 1, n)
        return body
    def renamed(data):
        at, size = top(data, b"moov")
        movie = data[at:at + size]
        for kind in (b"ctts", b"stss"):
            movie = movie.replace(kind, b"free")
        return data[:at] + movie + data[at + size:]
    return lambda data: renamed(edit(edit(edit(data, STBL + [b"stsz"], stsz), STBL + [b"stsc"], stsc), STBL + [b"stts"], stts))
claim = claim_samples(85000000)
add(write("index/mp4-85m-samples.mp4", claim(read("made/h264-video-only.mp4"))), "corrupt-image",
    "MP4 of a few KB whose sample tables claim 85 million samples (a 2 GB index)")
add(write("index/mp4-85m-samples-2-tracks.mp4", claim(fast)), "corrupt-image",
    "MP4, moov first, whose video and audio tracks each claim 85 million samples")
sparse = write("index/mp4-85m-samples-100mb.mp4", claim(read("made/h264-video-only.mp4")))
os.truncate(os.path.join(V, sparse), 100 * 1000 * 1000)  # a hole: the bytes could hold the claim
add(sparse, "corrupt-image", "the same in a 100 MB file (sparse), stopped by FFmpeg's allocation cap, not by the byte count")

def cue_point(time, position):
    positions = ebml(b"\xf7", b"\x01") + ebml(b"\xf1", struct.pack(">I", position))
    return ebml(b"\xbb", ebml(b"\xb3", struct.pack(">I", time)) + ebml(b"\xb7", positions))
def many_cues(data, count):
    """The Matroska's Cues (its last element) replaced by `count` CuePoints, 19 bytes each."""
    at = data.rfind(b"\x1c\x53\xbb\x6b")
    if at < 0:
        raise SystemExit("make-hostile-videos: no Cues element")
    cues = b"".join(cue_point(t, t * 7) for t in range(count))
    return data[:at] + b"\x1c\x53\xbb\x6b" + b"\x01" + len(cues).to_bytes(7, "big") + cues
add(write("index/mkv-200k-cues.mkv", many_cues(mkv, 50000 if short else 200000)), "result,corrupt-image",
    "Matroska whose Cues hold 200,000 CuePoints (an index bounded by the file's bytes)")

def idx1_claims(data):
    """The AVI's idx1 with one entry left for its audio stream, claiming 1 GiB (FFmpeg cuts
    such an entry into 1024-byte pieces), and every video entry claiming 1 GiB too."""
    at = data.find(b"idx1")
    if at < 0:
        raise SystemExit("make-hostile-videos: no idx1")
    out, (size,) = bytearray(data), struct.unpack("<I", data[at + 4:at + 8])
    seen = False
    for entry in range(at + 8, at + 8 + size - size % 16, 16):
        if out[entry + 2:entry + 4] == b"wb":
            if seen:
                out[entry:entry + 4] = b"99wb"
                continue
            seen = True
        out[entry + 12:entry + 16] = struct.pack("<I", 0x3FFFFFF0)
    return bytes(out)
add(write("index/avi-idx1-1gib-entries.avi", idx1_claims(read("made/pcm.avi"))), "result,corrupt-image",
    "AVI whose idx1 entries each claim 1 GiB, its audio stream's one entry cut by FFmpeg into a million pieces")

# 8. Random damage to every good clip: bytes changed, and cuts.
for name in bases:
    data = read("base/" + name)
    stem, ext = os.path.splitext(name)
    for v, count in enumerate([1, 16, 256][: 2 if short else 3]):
        changed = bytearray(data)
        for _ in range(count):
            changed[rng.randrange(len(changed))] = rng.randrange(256)
        add(write("mutated/%s-bytes-%d%s" % (stem, count, ext), bytes(changed)), DAMAGED, "%s with %d random bytes changed" % (name, count))
    cuts = [len(data) // 3, len(data) - 1] if short else [100, len(data) // 3, 2 * len(data) // 3, len(data) - 1]
    for cut in cuts:
        add(write("mutated/%s-cut-%d%s" % (stem, cut, ext), data[:cut]), DAMAGED, "%s cut at %d of %d bytes" % (name, cut, len(data)))

with open(os.path.join(root, "manifest.tsv"), "a") as f:
    for row in manifest:
        f.write("\t".join(row) + "\n")
print("make-hostile-videos: %d cases in %s" % (len(manifest), V))
EOF
