#!/usr/bin/python3
# The "real file manager" check of issue 21 (`make thunar-check`): Debian's Thunar under Xvfb
# opens a folder in its icon view with thumbnails always on, with viewerd-thumbnailer and with
# Tumbler as the owner of org.freedesktop.thumbnails.Thumbnailer1, the two sides' runs
# interleaved: first photos/ (31 photos, RUNS runs a side), then photos-videos/ (the same photos
# and 4 videos, VIDEO_RUNS runs a side). For each run it measures the seconds from Thunar's
# start to the last thumbnail on disk, counts the files lost and the requests left unanswered,
# counts what Thunar queued (from the bus traffic), and checks a screenshot: every icon must
# show the file's own thumbnail.
#
#   /usr/bin/python3 bench/thunar-check.py [--runs 3] [--video-runs 1] [--photos 31] [--videos 4]
#       [--timeout 30] [--zoom 200_PERCENT] [--sides viewerd,tumbler] [--build-dir .build/release]
#       [--tumbler-gst] [--work DIR] [--keep] [--json FILE]
#
# Needs (make thunar-check installs them): thunar, xfconf, xvfb, x11-apps (xwd), imagemagick
# (convert), xdotool, dbus (dbus-daemon, dbus-monitor), tumbler, libvips-tools (the photos),
# ffmpeg (the videos), ffmpegthumbnailer (Tumbler's videos), python3-gi with GdkPixbuf,
# python3-numpy; and a build of viewerd and viewerd-thumbnailer. Run it with Debian's
# /usr/bin/python3 (for gi), not a pyenv's. The files are made once, into
# ${XDG_CACHE_HOME:-~/.cache}/viewerd-thunar-check.
#
# How each run is isolated: a dbus-daemon of its own (a config with no service directory, so
# nothing is activated behind the check's back: xfconfd, the thumbnailer and Thunar are started
# by this script), a fresh HOME, XDG_CACHE_HOME, XDG_CONFIG_HOME and XDG_RUNTIME_DIR, a fresh
# viewerd store, Thunar's settings written as xfconf's channel file before xfconfd starts
# (/misc-thumbnail-mode THUNAR_THUMBNAIL_MODE_ALWAYS, /default-view ThunarIconView, the window
# as large as the screen, Thunar's default zoom: Thunar 4.18 asks for the normal flavor, and
# --zoom 200_PERCENT for large). One Xvfb serves every run, one Thunar at a time. The files are
# read once before each run so that both sides find them in the page cache. Tumbler gets
# Debian's tumbler.rc with the GStreamer thumbnailer off (see tumbler_settings).
#
# Lost files: dbus-monitor --pcap records every message of the run's bus; each Queue call is
# tied to its handle by the method return, and each queued (handle, URI) should end in Ready
# or Error for that handle (or its handle be dequeued by Thunar): those that do not are counted
# as unanswered requests ("Finished without it", or "never finished" by the timeout). A file is
# lost when Thunar queued it and no handle ever answered it with Ready or Error: Thunar then
# keeps its generic icon (whether a thumbnail reached the disk or not is said beside it).
#
# The screenshot check: a reference screenshot of each folder is taken with /misc-thumbnail-mode
# THUNAR_THUMBNAIL_MODE_NEVER (generic icons, same window, same layout). In each run's
# screenshot, the pixels that differ from the reference form one region per icon whose picture
# changed (connected components; text-sized ones left out: the free space in the status bar
# changes between runs). In each region, the pixels that are not the view's background are the
# drawn thumbnail; it is compared with every thumbnail PNG the run wrote, scaled to the drawn
# size: a region matches a file when the mean difference is at most 16 of 255 and every other
# thumbnail is at least 10 worse. Every file of the folder must be matched, each in a region of
# its own, and no changed region be left unmatched. The photos are distinct fields of colour,
# so a generic icon or another file's picture does not match (Thunar draws the PNG scaled as
# GdkPixbuf does: the right file matches at 0.0, the next best about 45 away). This also
# catches a file answered Ready whose icon Thunar did not redraw.
#
# Exit status: 0 when viewerd lost nothing, left no request unanswered, thumbnailed every file
# and passed the screenshot check in every run; 1 otherwise; 2 when the check could not run.
# viewerd-thumbnailer's exit status after the SIGTERM that ends each run is reported (a warning).

import argparse
import hashlib
import json
import os
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import gi

gi.require_version("Gio", "2.0")
gi.require_version("GdkPixbuf", "2.0")
from gi.repository import GdkPixbuf, Gio, GLib  # noqa: E402

try:
    import numpy as np
except ImportError:
    sys.exit("thunar-check: needs python3-numpy (apt-get install python3-numpy, or make thunar-check)")

THUMBNAILER = "org.freedesktop.thumbnails.Thumbnailer1"
XFCONF = "org.xfce.Xfconf"
TUMBLERD = "/usr/lib/x86_64-linux-gnu/tumbler-1/tumblerd"
XFCONFD = "/usr/lib/x86_64-linux-gnu/xfce4/xfconf/xfconfd"
SCREEN = (1280, 1024)
FLAVORS = ("normal", "large", "x-large", "xx-large")
CORPUS_VERSION = 2
REPO = Path(__file__).resolve().parent.parent


def log(text):
    print(text, flush=True)


# MARK: The corpus


def make_corpus(root: Path, photos: int, videos: int) -> dict[str, list[Path]]:
    """Two folders: photos/, photos of distinct colour fields (an 8x6 grid of random colours
    blown up with a cubic kernel, with grain) from 1000 to 4000 px, two JPEGs to one PNG, some
    portrait; and photos-videos/, the same photos (hard links) and videos of ffmpeg's test
    sources. Made once, kept while the manifest matches."""
    manifest = root / "manifest.json"
    wanted = {"version": CORPUS_VERSION, "photos": photos, "videos": videos}
    folder, mixed = root / "photos", root / "photos-videos"

    def listing(names):
        return {"photos": [folder / n for n in names if n.startswith("photo-")],
                "photos-videos": [mixed / n for n in names]}
    if manifest.exists() and json.loads(manifest.read_text()).get("params") == wanted:
        return listing(json.loads(manifest.read_text())["files"])
    shutil.rmtree(root, ignore_errors=True)
    folder.mkdir(parents=True)
    mixed.mkdir()
    scratch = root / "scratch"
    scratch.mkdir()
    names = []
    log(f"thunar-check: making {photos} photos and {videos} videos in {folder} (once)")
    for i in range(photos):
        long_side = 1000 + (i * 1637) % 3001
        ext = "png" if i % 3 == 2 else "jpg"
        if ext == "png":
            long_side = min(long_side, 2400)  # PNGs of grain do not compress: keep them to ~10 MB
        portrait = i % 4 == 3
        w, h = (long_side * 3 // 4, long_side) if portrait else (long_side, long_side * 3 // 4)
        gw, gh = (6, 8) if portrait else (8, 6)
        name = f"photo-{i + 1:02d}-{w}x{h}.{ext}"
        s = lambda n: str(scratch / n)  # noqa: E731
        vips = lambda *a: subprocess.run(["vips", *map(str, a)], check=True)  # noqa: E731
        for band in range(3):
            vips("gaussnoise", s(f"b{band}.v"), gw, gh, "--mean", 128, "--sigma", 75, "--seed", 1000 + i * 3 + band)
        vips("bandjoin", f"{s('b0.v')} {s('b1.v')} {s('b2.v')}", s("small.v"))
        vips("resize", s("small.v"), s("big.v"), w / gw, "--vscale", h / gh, "--kernel", "cubic")
        vips("gaussnoise", s("grain.v"), w, h, "--mean", 0, "--sigma", 8, "--seed", 5000 + i)
        vips("add", s("big.v"), s("grain.v"), s("sum.v"))
        vips("cast", s("sum.v"), s("clip.v"), "uchar")
        # No white: the screenshot check tells a thumbnail from the view's background.
        vips("linear", s("clip.v"), s("dim.v"), 0.85, 10)
        opts = "[Q=90]" if ext == "jpg" else "[compression=3]"
        vips("cast", s("dim.v"), str(folder / name) + opts, "uchar")
        os.link(folder / name, mixed / name)
        names.append(name)
    sources = [
        ("mp4", "testsrc2=size=1280x720:rate=25", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast"]),
        ("webm", "mandelbrot=size=960x540:rate=25", ["-c:v", "libvpx", "-b:v", "1M"]),
        ("mkv", "life=size=800x600:mold=10:rate=25:ratio=0.1:death_color=#C83232:life_color=#00ff00",
         ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast"]),
        ("mov", "smptehdbars=size=1280x720:rate=25", ["-c:v", "libx264", "-pix_fmt", "yuv420p", "-preset", "veryfast"]),
    ]
    for i in range(videos):
        ext, source, codec = sources[i % len(sources)]
        name = f"video-{i + 1:02d}.{ext}"
        hue = [] if i < len(sources) else ["-vf", f"hue=h={(i // len(sources)) * 90}"]
        subprocess.run(["ffmpeg", "-v", "error", "-y", "-f", "lavfi", "-i", source, "-t", "3", *hue, *codec,
                        str(mixed / name)], check=True)
        names.append(name)
    shutil.rmtree(scratch)
    manifest.write_text(json.dumps({"params": wanted, "files": names}, indent=1))
    return listing(names)


# MARK: Processes


class Processes:
    """What a run started, stopped in reverse order by pid (SIGTERM, then SIGKILL)."""

    def __init__(self):
        self.started: list[tuple[str, subprocess.Popen]] = []

    def spawn(self, name, argv, env, logfile, stdout=None):
        out = open(logfile, "wb")
        proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=stdout or out, stderr=out,
                                start_new_session=True)
        out.close()
        if stdout not in (None, subprocess.PIPE):
            stdout.close()
        self.started.append((name, proc))
        return proc

    def stop(self, proc, grace=5.0):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return proc.returncode

    def stop_all(self):
        statuses = {}
        for name, proc in reversed(self.started):
            statuses[name] = (proc.poll(), self.stop(proc))  # (status before the stop, after)
        self.started = []
        return statuses


def wait_for(what, predicate, timeout=10.0, step=0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(step)
    raise RuntimeError(f"timed out waiting for {what}")


# MARK: The bus


# The repository's private session bus (no service directory), at an address of each run's own.
BUS_CONFIG = REPO / "dbus" / "private-session.conf"


def bus_connection(address):
    flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
    return Gio.DBusConnection.new_for_address_sync(address, flags, None, None)


def has_owner(connection, name):
    reply = connection.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                 "NameHasOwner", GLib.Variant("(s)", (name,)), GLib.VariantType("(b)"),
                                 Gio.DBusCallFlags.NONE, 2000, None)
    return reply.unpack()[0]


class PcapReader:
    """dbus-monitor --pcap's stream, read as it grows: (time, Gio.DBusMessage) per message."""

    def __init__(self, path):
        self.path, self.offset, self.endian = path, 0, None

    def read_new(self):
        try:
            with open(self.path, "rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return []
        messages, at = [], 0
        if self.endian is None:
            if len(data) < 24:
                return []
            self.endian = "<" if struct.unpack("<I", data[:4])[0] == 0xA1B2C3D4 else ">"
            at = 24
        while at + 16 <= len(data):
            sec, usec, length, _ = struct.unpack(self.endian + "IIII", data[at:at + 16])
            if at + 16 + length > len(data):
                break
            blob = data[at + 16:at + 16 + length]
            at += 16 + length
            try:
                message = Gio.DBusMessage.new_from_blob(blob, Gio.DBusCapabilityFlags.UNIX_FD_PASSING)
            except GLib.Error:
                continue
            messages.append((sec + usec / 1e6, message))
        self.offset += at
        return messages


class Traffic:
    """The Thumbnailer1 conversation of a run, from the monitor's messages."""

    def __init__(self):
        self.queues = []           # dict(time, sender, serial, uris, flavor, scheduler, unqueue, handle)
        self.pending = {}          # (sender, serial) -> queue
        self.by_handle = {}        # handle -> queue
        self.signals = []          # (time, member, handle, uris, code, text)
        self.dequeues = []         # (time, handle)
        self.other_calls = Counter()
        self.last_time = None

    def add(self, messages):
        for t, m in messages:
            kind = m.get_message_type()
            if kind == Gio.DBusMessageType.METHOD_CALL and m.get_interface() == THUMBNAILER:
                self.last_time = t
                member, body = m.get_member(), m.get_body()
                if member == "Queue":
                    uris, _, flavor, scheduler, unqueue = body.unpack()
                    q = dict(time=t, sender=m.get_sender(), serial=m.get_serial(), uris=list(uris), flavor=flavor,
                             scheduler=scheduler, unqueue=unqueue, handle=None)
                    self.queues.append(q)
                    self.pending[(q["sender"], q["serial"])] = q
                elif member == "Dequeue":
                    self.dequeues.append((t, body.unpack()[0]))
                else:
                    self.other_calls[member] += 1
            elif kind == Gio.DBusMessageType.METHOD_RETURN:
                q = self.pending.pop((m.get_destination(), m.get_reply_serial()), None)
                if q is not None and m.get_body() is not None:
                    q["handle"] = m.get_body().unpack()[0]
                    self.by_handle[q["handle"]] = q
            elif kind == Gio.DBusMessageType.SIGNAL and m.get_interface() == THUMBNAILER:
                self.last_time = t
                values = m.get_body().unpack() if m.get_body() is not None else ()
                member = m.get_member()
                if member in ("Ready", "Error"):
                    code, text = (values[2], values[3]) if member == "Error" else (None, None)
                    self.signals.append((t, member, values[0], list(values[1]), code, text))
                else:
                    self.signals.append((t, member, values[0], [], None, None))

    def answered_uris(self):
        return {uri for _, member, _, uris, _, _ in self.signals if member in ("Ready", "Error") for uri in uris}

    def summary(self, uris):
        """Per file: times queued, answered; per request: the (handle, URI) pairs left unanswered."""
        queued = Counter(uri for q in self.queues for uri in q["uris"])
        ready, errors = defaultdict(set), defaultdict(list)
        for _, member, handle, sig_uris, code, text in self.signals:
            for uri in sig_uris:
                if member == "Ready":
                    ready[handle].add(uri)
                else:
                    errors[handle].append((uri, code, text))
        errored = {h: {u for u, _, _ in e} for h, e in errors.items()}
        finished = {h for _, member, h, _, _, _ in self.signals if member == "Finished"}
        dequeued = {h for _, h in self.dequeues} | {q["unqueue"] for q in self.queues if q["unqueue"]}
        unanswered = []  # (handle, uri, why)
        for q in self.queues:
            h = q["handle"]
            if h is None:
                unanswered.extend((None, uri, "no handle returned") for uri in q["uris"])
                continue
            if h in dequeued:
                continue
            for uri in q["uris"]:
                if uri not in ready[h] and uri not in errored.get(h, set()):
                    unanswered.append((h, uri, "Finished without it" if h in finished else "never finished"))
        answered = {u for s in ready.values() for u in s} | {u for s in errored.values() for u in s}
        error_uris = {u: (c, t) for e in errors.values() for u, c, t in e}
        return dict(
            queue_calls=len(self.queues),
            uris_queued=sum(queued.values()),
            per_file=Counter(queued.get(uri, 0) for uri in uris),  # times queued -> number of files
            flavors=Counter(q["flavor"] for q in self.queues),
            schedulers=Counter(q["scheduler"] for q in self.queues),
            dequeues=len(self.dequeues) + sum(1 for q in self.queues if q["unqueue"]),
            ready_signals=sum(1 for s in self.signals if s[1] == "Ready"),
            error_signals=sum(1 for s in self.signals if s[1] == "Error"),
            ready_uris=sum(len(s) for s in ready.values()),
            never_answered=[uri for uri in uris if queued.get(uri) and uri not in answered],
            never_queued=[uri for uri in uris if not queued.get(uri)],
            unanswered=unanswered,
            errors=error_uris,
        )


# MARK: Screenshots


def screenshot(display, stem: Path):
    """The root window as an RGB array; stem.png kept for a person to look at."""
    xwd = stem.with_suffix(".xwd")
    subprocess.run(["xwd", "-root", "-silent", "-display", display, "-out", str(xwd)], check=True)
    rgb = subprocess.run(["convert", str(xwd), "-depth", "8", "rgb:-"], check=True, capture_output=True).stdout
    subprocess.run(["convert", str(xwd), str(stem.with_suffix(".png"))], check=True)
    xwd.unlink()
    return np.frombuffer(rgb, dtype=np.uint8).reshape(SCREEN[1], SCREEN[0], 3)


def settled_screenshot(display, stem: Path, least=1.0, most=15.0):
    """A screenshot once two taken 0.5 s apart are the same (Thunar has drawn), after `least`."""
    time.sleep(least)
    deadline = time.monotonic() + most
    shot = screenshot(display, stem)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        again = screenshot(display, stem)
        if np.array_equal(shot, again):
            return shot
        shot = again
    return shot


def components(mask):
    """Bounding boxes (y0, x0, y1, x1) of the 8-connected regions of a boolean array."""
    seen = np.zeros_like(mask)
    boxes = []
    height, width = mask.shape
    for y, x in zip(*np.nonzero(mask)):
        if seen[y, x]:
            continue
        seen[y, x] = True
        stack, box = [(y, x)], [y, x, y, x]
        while stack:
            cy, cx = stack.pop()
            box = [min(box[0], cy), min(box[1], cx), max(box[2], cy), max(box[3], cx)]
            for ny in (cy - 1, cy, cy + 1):
                for nx in (cx - 1, cx, cx + 1):
                    if 0 <= ny < height and 0 <= nx < width and mask[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        stack.append((ny, nx))
        boxes.append(tuple(box))
    return boxes


def pixbuf_array(pixbuf, background):
    w, h, stride, n = pixbuf.get_width(), pixbuf.get_height(), pixbuf.get_rowstride(), pixbuf.get_n_channels()
    data = np.frombuffer(pixbuf.get_pixels(), dtype=np.uint8)
    rows = np.stack([data[y * stride:y * stride + w * n] for y in range(h)]).reshape(h, w, n).astype(np.float32)
    if n == 4:
        alpha = rows[:, :, 3:4] / 255.0
        rows = rows[:, :, :3] * alpha + np.array(background, dtype=np.float32) * (1 - alpha)
    return rows[:, :, :3]


def check_screenshot(shot, reference, expected: list[str], thumbnails: dict):
    """expected: the folder's file names; thumbnails: file name -> the thumbnail PNG the run wrote.
    Every expected file must be found in an icon of its own, showing its own thumbnail."""
    diff = np.abs(shot.astype(np.int16) - reference.astype(np.int16)).max(axis=2) > 32
    # The view's background: the reference's most common colour.
    packed = (reference[::4, ::4].reshape(-1, 3).astype(np.int32) * [65536, 256, 1]).sum(axis=1)
    mode = np.bincount(packed).argmax()
    background = (mode >> 16 & 255, mode >> 8 & 255, mode & 255)
    not_background = np.abs(shot.astype(np.int16) - np.array(background, dtype=np.int16)).max(axis=2) > 24
    # Regions on a 2-px grid (icons stand ~10 px apart), text-sized ones left out.
    block = 2
    h, w = diff.shape
    coarse = diff[:h // block * block, :w // block * block].reshape(h // block, block, w // block, block).any(axis=(1, 3))
    regions = []
    for y0, x0, y1, x1 in components(coarse):
        y0, x0, y1, x1 = y0 * block, x0 * block, (y1 + 1) * block, (x1 + 1) * block
        if y1 - y0 < 20 or x1 - x0 < 20:
            continue
        inside = diff[y0:y1, x0:x1] & not_background[y0:y1, x0:x1]
        ys, xs = np.nonzero(inside)
        if len(ys) == 0:
            regions.append(dict(box=(x0, y0, x1, y1), drawn=None))
            continue
        regions.append(dict(box=(x0, y0, x1, y1), drawn=(x0 + xs.min(), y0 + ys.min(), x0 + xs.max() + 1, y0 + ys.max() + 1)))
    pixbufs = {name: GdkPixbuf.Pixbuf.new_from_file(str(path)) for name, path in thumbnails.items()}
    names = sorted(pixbufs)
    scores = np.full((len(regions), max(len(names), 1)), 255.0)
    for r, region in enumerate(regions):
        if region["drawn"] is None:
            continue
        x0, y0, x1, y1 = region["drawn"]
        crop = shot[y0:y1, x0:x1].astype(np.float32)
        for f, name in enumerate(names):
            scaled = pixbufs[name].scale_simple(x1 - x0, y1 - y0, GdkPixbuf.InterpType.BILINEAR)
            scores[r, f] = np.abs(pixbuf_array(scaled, background) - crop).mean()
    # A match: mean absolute difference per channel of at most 16 (of 255), and every other
    # thumbnail at least 10 worse (the photos are alike in kind: distinct fields of colour).
    limit, margin = 16.0, 10.0
    matched, unmatched_regions, margins = {}, [], []
    for r, region in enumerate(regions):
        if not names:
            unmatched_regions.append(region["box"])
            continue
        order = np.argsort(scores[r])
        best = order[0]
        second = scores[r, order[1]] if len(names) > 1 else 255.0
        margins.append(second - scores[r, best])
        if scores[r, best] <= limit and second - scores[r, best] >= margin:
            matched.setdefault(names[best], []).append((region["box"], float(scores[r, best])))
        else:
            unmatched_regions.append(region["box"])
    twice = [name for name, hits in matched.items() if len(hits) > 1]
    missing = [name for name in expected if name not in matched]
    ok = bool(expected) and not missing and not twice and not unmatched_regions
    return dict(ok=ok, files=len(expected), regions=len(regions), thumbnails=len(names), matched=len(matched),
                missing=missing, twice=twice, unmatched_regions=unmatched_regions,
                worst_score=max((hits[0][1] for hits in matched.values()), default=None),
                least_margin=min(margins, default=None))


# MARK: A run


def thunar_settings(config: Path, mode: str, zoom: str | None):
    channel = config / "xfce4/xfconf/xfce-perchannel-xml"
    channel.mkdir(parents=True, exist_ok=True)
    (channel / "thunar.xml").write_text(f"""<?xml version="1.0" encoding="UTF-8"?>
<channel name="thunar" version="1.0">
  <property name="misc-thumbnail-mode" type="string" value="THUNAR_THUMBNAIL_MODE_{mode}"/>
  <property name="misc-thumbnail-max-file-size" type="uint64" value="0"/>
  <property name="misc-thumbnail-draw-frames" type="bool" value="false"/>
  <property name="default-view" type="string" value="ThunarIconView"/>
  <property name="last-view" type="string" value="ThunarIconView"/>
  <property name="last-window-width" type="int" value="{SCREEN[0]}"/>
  <property name="last-window-height" type="int" value="{SCREEN[1] - 24}"/>
  <property name="last-window-maximized" type="bool" value="false"/>
  <property name="last-show-hidden" type="bool" value="false"/>
""" + (f'  <property name="last-icon-view-zoom-level" type="string" value="THUNAR_ZOOM_LEVEL_{zoom}"/>\n' if zoom else "")
        + "</channel>\n")


def tumbler_settings(config: Path):
    """Debian's tumbler.rc with the GStreamer thumbnailer off: with no GStreamer decoders
    installed (none of this check's packages brings them), tumblerd 4.18 crashes (SIGSEGV) on
    the first video; the videos go to ffmpegthumbnailer through its .thumbnailer file instead."""
    system = Path("/etc/xdg/tumbler/tumbler.rc")
    text = system.read_text() if system.exists() else ""
    out, group = [], None
    for line in text.splitlines():
        if line.startswith("["):
            group = line.strip()
        if group == "[GstThumbnailer]" and line.startswith("Disabled="):
            line = "Disabled=true"
        out.append(line)
    (config / "tumbler").mkdir(parents=True, exist_ok=True)
    (config / "tumbler" / "tumbler.rc").write_text("\n".join(out) + "\n")


def thumbnail_name(path: Path):
    uri = GLib.filename_to_uri(str(path), None)
    return uri, hashlib.md5(uri.encode()).hexdigest() + ".png"


class Check:
    def __init__(self, args, display, work: Path):
        self.args, self.display, self.work = args, display, work
        self.references = {}  # folder -> its screenshot with thumbnails off

    def environment(self, home: Path):
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("VIEWERD_", "XDG_", "DBUS_", "GTK_", "GIO_", "WAYLAND"))}
        env.update(HOME=str(home / "home"), XDG_CACHE_HOME=str(home / "cache"), XDG_CONFIG_HOME=str(home / "config"),
                   XDG_DATA_HOME=str(home / "data"), XDG_RUNTIME_DIR=str(home / "runtime"), DISPLAY=self.display,
                   NO_AT_BRIDGE="1", GSETTINGS_BACKEND="memory", LANG="C.UTF-8", LC_ALL="C.UTF-8")
        for d in ("home", "cache", "config", "data", "runtime"):
            (home / d).mkdir(parents=True, exist_ok=True, mode=0o700)
        return env

    def run(self, side: str, index: int, folder: str, files: list[Path]):
        """side: viewerd, tumbler, or reference (thumbnails off, no thumbnailer)."""
        home = self.work / f"{folder}-{side}-{index}"
        shutil.rmtree(home, ignore_errors=True)
        env = self.environment(home)
        thunar_settings(home / "config", "NEVER" if side == "reference" else "ALWAYS", self.args.zoom)
        names = {thumbnail_name(f)[0]: f for f in files}
        procs = Processes()
        result = dict(side=side, run=index, folder=folder, load=round(os.getloadavg()[0], 2))
        try:
            bus_path = home / "bus"
            daemon = procs.spawn("dbus-daemon", ["dbus-daemon", "--config-file", str(BUS_CONFIG), f"--address=unix:path={bus_path}",
                                                 "--nofork", "--print-address"], env, home / "dbus-daemon.log",
                                 stdout=subprocess.PIPE)
            address = daemon.stdout.readline().decode().strip()
            if not address:
                raise RuntimeError("dbus-daemon did not start")
            env["DBUS_SESSION_BUS_ADDRESS"] = address
            bus = bus_connection(address)
            procs.spawn("xfconfd", [XFCONFD], env, home / "xfconfd.log")
            wait_for("xfconfd", lambda: has_owner(bus, XFCONF))

            if side == "viewerd":
                socket = home / "viewerd.sock"
                (home / "viewerd.conf").write_text("")
                procs.spawn("viewerd", [str(self.args.build_dir / "viewerd"), "--config", str(home / "viewerd.conf"),
                                        "--socket", str(socket), "--cache-dir", str(home / "viewerd-store")],
                            env, home / "viewerd.log")
                wait_for("viewerd's socket", socket.exists)
                # The cache from XDG_CACHE_HOME, as a desktop session would have it.
                procs.spawn("viewerd-thumbnailer", [str(self.args.build_dir / "viewerd-thumbnailer"),
                                                    "--socket", str(socket), "--bus", address],
                            env, home / "viewerd-thumbnailer.log")
                wait_for("viewerd-thumbnailer on the bus", lambda: has_owner(bus, THUMBNAILER))
            elif side == "tumbler":
                if not self.args.tumbler_gst:
                    tumbler_settings(home / "config")
                procs.spawn("tumblerd", [TUMBLERD], env, home / "tumblerd.log")
                wait_for("tumblerd on the bus", lambda: has_owner(bus, THUMBNAILER))

            pcap = home / "bus.pcap"
            procs.spawn("dbus-monitor", ["dbus-monitor", "--address", address, "--pcap"], env, home / "dbus-monitor.log",
                        stdout=open(pcap, "wb"))
            reader, traffic = PcapReader(pcap), Traffic()

            def monitoring():  # the monitor is in place once it records a call of ours
                bus.call_sync("org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus", "GetId",
                              None, None, Gio.DBusCallFlags.NONE, 2000, None)
                return pcap.exists() and pcap.stat().st_size > 24
            wait_for("dbus-monitor", monitoring, step=0.05)
            for f in files:  # the page cache warm for both sides alike
                with open(f, "rb") as source:
                    while source.read(1 << 22):
                        pass

            cache = home / "cache" / "thumbnails"
            expected = {uri: thumbnail_name(f)[1] for uri, f in names.items()}
            on_disk = {}
            started_wall, started = time.time(), time.monotonic()
            thunar = procs.spawn("thunar", ["thunar", str(files[0].parent)], env, home / "thunar.log")

            if side == "reference":
                result["shot"] = settled_screenshot(self.display, home / "screenshot", least=2.0)
                return result

            deadline = started + self.args.timeout
            quiet_since = None
            while time.monotonic() < deadline:
                now = time.monotonic()
                for uri, name in expected.items():
                    if uri not in on_disk and any((cache / flavor / name).exists() for flavor in FLAVORS):
                        on_disk[uri] = now - started
                traffic.add(reader.read_new())
                if thunar.poll() is not None:
                    break
                if len(on_disk) == len(expected) or set(expected) <= (traffic.answered_uris() | set(on_disk)):
                    # Then on until the bus has been quiet for a second (repeats, late answers).
                    if time.time() - (traffic.last_time or started_wall) >= 1.0:
                        quiet_since = quiet_since or now
                        if now - quiet_since >= 0.5:
                            break
                time.sleep(0.01)
            result["seconds"] = max(on_disk.values()) if len(on_disk) == len(expected) else None
            result["last_on_disk"] = max(on_disk.values(), default=None)
            result["on_disk"] = len(on_disk)
            result["thunar_exited"] = thunar.poll()

            # The screenshot once Thunar has drawn, against the thumbnails this run wrote.
            shot = settled_screenshot(self.display, home / "screenshot")
            thumbnails = {}
            for uri, name in expected.items():
                for flavor in FLAVORS:
                    if (cache / flavor / name).exists():
                        thumbnails[names[uri].name] = cache / flavor / name
                        break
            result["screenshot"] = check_screenshot(shot, self.references[folder], [f.name for f in files], thumbnails)
            traffic.add(reader.read_new())
        finally:
            statuses = procs.stop_all()
        traffic.add(reader.read_new())
        summary = traffic.summary(list(names))
        first_queue = min((q["time"] for q in traffic.queues), default=None)
        last_answer = max((t for t, member, *_ in traffic.signals if member in ("Ready", "Error")), default=None)
        result.update(summary)
        result["files"] = len(files)
        result["first_queue"] = first_queue - started_wall if first_queue else None
        result["last_answer"] = last_answer - started_wall if last_answer else None
        # Lost as the issue counts it: queued, and no handle ever answered Ready or Error for it
        # (Thunar then keeps the generic icon even when a thumbnail was written).
        result["lost"] = summary["never_answered"]
        result["no_thumbnail"] = [uri for uri in names if uri not in on_disk]
        # (status when the run ended: None while it ran; status after this script's SIGTERM)
        thumbnailer = "viewerd-thumbnailer" if side == "viewerd" else "tumblerd"
        result["thumbnailer_died"], result["thumbnailer_sigterm_status"] = statuses.get(thumbnailer, (None, None))
        if side == "viewerd":
            result["viewerd_died"] = statuses.get("viewerd", (None, None))[0]
        return result


# MARK: The report


def short(uri):
    return uri.rsplit("/", 1)[-1]


def describe(result):
    def counter(c):
        return ", ".join(f"{k}: {v}" for k, v in sorted(c.items()))
    seconds = f"{result['seconds']:.2f} s" if result["seconds"] is not None else \
        f"incomplete ({result['on_disk']} of {result['files']} on disk, the last at {result['last_on_disk'] or 0:.2f} s)"
    lines = [f"{result['folder']}, {result['side']} run {result['run']}: last thumbnail on disk {seconds}; "
             f"first Queue at {result['first_queue'] or 0:.2f} s, last Ready/Error at {result['last_answer'] or 0:.2f} s "
             f"(load average {result['load']})",
             f"  Queue calls {result['queue_calls']} ({result['uris_queued']} URIs; flavors {counter(result['flavors'])}; "
             f"schedulers {counter(result['schedulers'])}), files by times queued {{{counter(result['per_file'])}}}, "
             f"dequeues {result['dequeues']}, Ready signals {result['ready_signals']} ({result['ready_uris']} URIs), "
             f"Error signals {result['error_signals']}"]
    if result["lost"]:
        lines.append(f"  LOST {len(result['lost'])} (no Ready or Error for any of its requests): "
                     + ", ".join(short(u) + (" (a thumbnail on disk all the same)" if u not in result["no_thumbnail"] else "")
                                 for u in result["lost"]))
    if result["unanswered"]:
        lines.append(f"  unanswered requests {len(result['unanswered'])}: "
                     + ", ".join(f"{short(u)} (handle {h}: {why})" for h, u, why in result["unanswered"][:8])
                     + (", …" if len(result["unanswered"]) > 8 else ""))
    if result["errors"]:
        lines.append("  Errors: " + ", ".join(f"{short(u)} ({c}: {t})" for u, (c, t) in list(result["errors"].items())[:6]))
    missing = [u for u in result["no_thumbnail"] if u not in result["lost"]]
    if missing:
        lines.append(f"  no thumbnail (answered): {', '.join(map(short, missing))}")
    if result["never_queued"]:
        lines.append(f"  never queued by Thunar: {', '.join(map(short, result['never_queued']))}")
    if result["thumbnailer_died"] is not None:
        lines.append(f"  THE THUMBNAILER EXITED during the run, status {result['thumbnailer_died']}")
    elif result["thumbnailer_sigterm_status"]:
        lines.append(f"  the thumbnailer's exit status after SIGTERM: {status_text(result['thumbnailer_sigterm_status'])}")
    if result.get("viewerd_died") is not None:
        lines.append(f"  VIEWERD EXITED during the run, status {result['viewerd_died']}")
    if result.get("thunar_exited") is not None:
        lines.append(f"  Thunar exited during the run, status {result['thunar_exited']}")
    s = result.get("screenshot")
    if s:
        verdict = "PASS" if s["ok"] else "FAIL"
        lines.append(f"  screenshot: {verdict}: {s['matched']} of {s['files']} icons show the file's own thumbnail "
                     f"({s['regions']} icons changed from the thumbnails-off screenshot; worst match "
                     f"{s['worst_score'] or 0:.1f}/255, least margin to another thumbnail {s['least_margin'] or 0:.1f})"
                     + (f"; not shown: {', '.join(s['missing'])}" if s["missing"] else "")
                     + (f"; shown twice: {', '.join(s['twice'])}" if s["twice"] else "")
                     + (f"; changed icons matching no thumbnail at {s['unmatched_regions']}" if s["unmatched_regions"] else ""))
    return "\n".join(lines)


def status_text(status):
    if status is None:
        return "running"
    if status < 0:
        return f"killed by {signal.Signals(-status).name}"
    return str(status)


def free_display():
    """Xvfb -displayfd picks a free display number itself."""
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-screen", "0", f"{SCREEN[0]}x{SCREEN[1]}x24",
                             "-nolisten", "tcp", "-noreset"], pass_fds=(write,), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    os.close(write)
    number = b""
    while not number.endswith(b"\n"):
        chunk = os.read(read, 16)
        if not chunk:
            raise RuntimeError("Xvfb did not start")
        number += chunk
    os.close(read)
    return proc, ":" + number.decode().strip()


def main():
    parser = argparse.ArgumentParser(description="Thunar under Xvfb with viewerd-thumbnailer and with Tumbler")
    parser.add_argument("--runs", type=int, default=3, help="runs per side on the photos (default 3)")
    parser.add_argument("--photos", type=int, default=31)
    parser.add_argument("--videos", type=int, default=4,
                        help="videos beside the photos in the second folder (default 4; 0: no such runs)")
    parser.add_argument("--video-runs", type=int, default=1, help="runs per side on photos-videos (default 1)")
    parser.add_argument("--timeout", type=float, default=30, help="seconds a run waits for the last thumbnail")
    parser.add_argument("--sides", default="viewerd,tumbler")
    parser.add_argument("--zoom", default=None, metavar="LEVEL",
                        help="Thunar's icon view zoom, e.g. 200_PERCENT (thumbnails of the large flavor); "
                             "default Thunar's own, 100_PERCENT: the normal flavor")
    parser.add_argument("--tumbler-gst", action="store_true",
                        help="leave Tumbler's GStreamer thumbnailer on (it crashes on videos without GStreamer's decoders)")
    parser.add_argument("--build-dir", type=Path, default=None,
                        help="where viewerd and viewerd-thumbnailer are (default .build/release, else .build/debug)")
    parser.add_argument("--corpus", type=Path, default=None,
                        help="where the files are made once (default ${XDG_CACHE_HOME:-~/.cache}/viewerd-thunar-check)")
    parser.add_argument("--work", type=Path, default=None, help="the runs' homes and logs (default a new /tmp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (screenshots, logs, bus captures)")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    sides = [s for s in args.sides.split(",") if s]
    if not set(sides) <= {"viewerd", "tumbler"}:
        sys.exit("thunar-check: --sides takes viewerd, tumbler or both")
    if args.build_dir is None:
        args.build_dir = next((REPO / d for d in (".build/release", ".build/debug")
                               if (REPO / d / "viewerd-thumbnailer").exists()), REPO / ".build/release")
    needed = ["thunar", "Xvfb", "xwd", "convert", "dbus-daemon", "dbus-monitor", "vips", "ffmpeg", XFCONFD]
    if "tumbler" in sides:
        needed.append(TUMBLERD)
    if "viewerd" in sides:
        needed += [str(args.build_dir / "viewerd"), str(args.build_dir / "viewerd-thumbnailer")]
    missing = [n for n in needed if not shutil.which(n)]
    if missing:
        sys.exit(f"thunar-check: missing {', '.join(missing)} (make thunar-check installs and builds them)")

    corpus_root = args.corpus or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "viewerd-thunar-check"
    folders = make_corpus(corpus_root, args.photos, args.videos)
    plan = [(folder, runs) for folder, runs in (("photos", args.runs), ("photos-videos", args.video_runs if args.videos else 0))
            if runs > 0]
    work = args.work or Path(tempfile.mkdtemp(prefix="thunar-check-"))
    work.mkdir(parents=True, exist_ok=True)
    xvfb, display = free_display()
    if shutil.which("xdotool"):  # the pointer out of the view: no hover highlight on an icon
        subprocess.run(["xdotool", "mousemove", str(SCREEN[0] - 1), str(SCREEN[1] - 1)],
                       env={**os.environ, "DISPLAY": display}, check=False)
    log(f"thunar-check: Thunar {thunar_version()}, Tumbler {tumbler_version()}; Xvfb {display}; work in {work}; "
        f"{args.build_dir}")
    check = Check(args, display, work)
    results = []
    try:
        for folder, runs in plan:
            files = folders[folder]
            log(f"thunar-check: {folder}: {len(files)} files in {files[0].parent}")
            check.references[folder] = check.run("reference", 0, folder, files)["shot"]
            for index in range(1, runs + 1):
                for side in sides:  # interleaved: both sides see the machine's load alike
                    result = check.run(side, index, folder, files)
                    results.append(result)
                    log(describe(result))
    finally:
        xvfb.terminate()
        xvfb.wait()

    log("")
    log(f"summary ({args.photos} photos, {args.videos} videos; timeout {args.timeout:.0f} s)")
    failed = []
    for folder, _ in plan:
        for side in sides:
            runs = [r for r in results if r["side"] == side and r["folder"] == folder]
            complete = [r["seconds"] for r in runs if r["seconds"] is not None]
            median = f"{statistics.median(complete):.2f} s" if complete else "-"
            spread = f" ({min(complete):.2f}–{max(complete):.2f})" if len(complete) > 1 else ""
            per_file = Counter()
            for r in runs:
                per_file.update(r["per_file"])
            shots = [r.get("screenshot") for r in runs]
            verdicts = ["PASS" if s and s["ok"] else f"FAIL ({s['matched']}/{s['files']})" if s else "-" for s in shots]
            log(f"  {folder} ({runs[0]['files']} files), {side}: {len(runs)} runs, {len(complete)} complete; "
                f"median to the last thumbnail {median}{spread}")
            log(f"    lost per run {[len(r['lost']) for r in runs]}; unanswered requests per run "
                f"{[len(r['unanswered']) for r in runs]}; without thumbnail per run "
                f"{[len(r['no_thumbnail']) for r in runs]}; Errors per run {[len(r['errors']) for r in runs]}; "
                f"thumbnailer died in {sum(r['thumbnailer_died'] is not None for r in runs)}")
            log(f"    Queue calls per run {[r['queue_calls'] for r in runs]}, URIs queued per run "
                f"{[r['uris_queued'] for r in runs]}; files by times queued (all runs) "
                f"{{{', '.join(f'{k}x: {v}' for k, v in sorted(per_file.items()))}}}; screenshots {verdicts}")
            if side == "viewerd":
                stops = sorted({status_text(r["thumbnailer_sigterm_status"]) for r in runs
                                if r["thumbnailer_died"] is None and r["thumbnailer_sigterm_status"]})
                if stops:
                    log(f"    WARNING: viewerd-thumbnailer did not exit 0 on SIGTERM: {', '.join(stops)}")
                for r in runs:
                    if r["lost"] or r["unanswered"] or r["no_thumbnail"] or r["thumbnailer_died"] is not None \
                            or r.get("viewerd_died") is not None or not (r.get("screenshot") or {}).get("ok"):
                        failed.append(f"{folder} {r['run']}")
    if args.json:
        args.json.write_text(json.dumps([{k: v for k, v in r.items() if k != "shot"} for r in results],
                                        indent=1, default=str))
    if not args.keep and args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    else:
        log(f"thunar-check: screenshots, logs and bus captures in {work}")
    if "viewerd" in sides:
        log(f"thunar-check: viewerd {'FAILED in run(s) ' + ', '.join(failed) if failed else 'passed'}")
    return 1 if failed else 0


def thunar_version():
    out = subprocess.run(["thunar", "--version"], capture_output=True, text=True).stdout
    return out.split()[1] if len(out.split()) > 1 else "?"


def tumbler_version():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "tumbler"], capture_output=True, text=True).stdout
    return out or "?"


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (RuntimeError, subprocess.CalledProcessError) as error:
        print(f"thunar-check: {error}", file=sys.stderr)
        sys.exit(2)
