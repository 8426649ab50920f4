"""Conformance of viewerd-thumbnailer to the freedesktop thumbnail service, driven by real bus
clients (gdbus, and GDBus from Python: what Thunar's and GNOME's apps use) on a real bus
(make test: dbus-run-session), with a real viewerd: every method and signal of Thumbnailer1
and Cache1, the errors with Tumbler's codes, Dequeue and handle_to_unqueue, two clients, and
the PNGs the Thumbnail Managing Standard describes (issue 21)."""
from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import threading
import time
import unittest

from desktop_support import (NAME, PNG, REPO, name_owner_pid, ConformanceCase, Daemon, Front, Thumbnailer, front_executable, make_jpeg,
                             make_png, md5_name, require_session_bus, uri)

PATH = "/org/freedesktop/thumbnails/Thumbnailer1"


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 without Landlock."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    version = libc.syscall(444, None, 0, 1)  # landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    return max(0, version)


def gdbus(*args: str) -> str:
    return subprocess.run(["gdbus", *args], check=True, capture_output=True, text=True, timeout=30).stdout


class MethodsTests(ConformanceCase):
    def test_introspection_names_every_method_and_signal_with_tumblers_arguments(self) -> None:
        text = gdbus("introspect", "--session", "-d", NAME, "-o", PATH)
        for line in ["Queue(in  as uris,", "in  as mime_types,", "in  s flavor,", "in  s scheduler,",
                     "in  u handle_to_unqueue,", "out u handle);", "Dequeue(in  u handle);",
                     "GetSupported(out as uri_schemes,", "GetSchedulers(out as schedulers);",
                     "GetFlavors(out as flavors);", "Started(u handle);", "Finished(u handle);",
                     "Ready(u handle,", "Error(u handle,", "as failed_uris,", "i error_code,", "s message);"]:
            self.assertIn(line, text)
        cache = gdbus("introspect", "--session", "-d", "org.freedesktop.thumbnails.Cache1",
                      "-o", "/org/freedesktop/thumbnails/Cache1")
        for line in ["Move(in  as from_uris,", "Copy(in  as from_uris,", "Delete(in  as uris);",
                     "Cleanup(in  as base_uris,", "in  u since);"]:
            self.assertIn(line, cache)

    def test_flavors_schedulers_and_supported_types_through_gdbus_call(self) -> None:
        call = ["call", "--session", "-d", NAME, "-o", PATH, "-m"]
        self.assertEqual(gdbus(*call, NAME + ".GetFlavors").strip(), "(['normal', 'large', 'x-large', 'xx-large'],)")
        self.assertEqual(gdbus(*call, NAME + ".GetSchedulers").strip(), "(['default', 'foreground', 'background'],)")
        schemes, types = self.client.call("GetSupported", None, None, "(asas)")
        self.assertEqual(len(schemes), len(types))
        self.assertEqual(set(schemes), {"file"})
        for mime in ["image/jpeg", "image/png", "image/webp", "image/tiff", "video/mp4"]:
            self.assertIn(mime, types)

    def test_an_unknown_method_is_a_dbus_error(self) -> None:
        with self.assertRaises(Exception) as raised:
            self.client.call("Frobnicate", None, None)
        self.assertIn("UnknownMethod", str(raised.exception))


class QueueTests(ConformanceCase):
    def test_a_queue_writes_the_standards_thumbnails(self) -> None:
        # Given photos with awkward names, JPEG and PNG (one with alpha), one smaller than the box
        files = [self.photo("wide photo é.jpg", 1200, 600), self.photo("tall#1.jpg", 500, 900),
                 self.photo("alpha.png", 700, 700), self.photo("small.jpg", 100, 80)]
        for path in files:
            make_png(path, 700, 700, alpha=True) if path.endswith(".png") else None
        uris = [uri(path) for path in files]
        # (a reader polls one thumbnail's name all along: it must never see half a file)
        torn, stop = [], threading.Event()
        watched = self.thumbnail_path(files[0])

        def watch() -> None:
            while not stop.is_set():
                try:
                    if not PNG(watched).complete:
                        torn.append("incomplete")
                except FileNotFoundError:
                    pass
                except Exception as error:  # noqa: BLE001
                    torn.append(repr(error))
        watcher = threading.Thread(target=watch)
        watcher.start()
        self.addCleanup(stop.set)

        # When they are queued in the large flavor, a MIME type given for the first
        handle = self.client.queue(uris, ["image/jpeg", "", "", ""], "large", "foreground")
        outcome = self.client.wait(handle)
        stop.set()
        watcher.join()

        # Then Started, then Ready for every file, then Finished; no error
        self.assertEqual(outcome["errors"], [])
        self.assertEveryFileAnswered(outcome, uris)
        members = [m for m, args in self.client.signals if args[0] == handle]
        self.assertEqual(members[0], "Started")
        self.assertEqual(members[-1], "Finished")
        self.assertEqual(torn, [])
        version = self.version()
        boxes = {"wide photo é.jpg": (256, 128), "tall#1.jpg": (142, 256), "alpha.png": (256, 256), "small.jpg": (100, 80)}
        originals = {"wide photo é.jpg": (1200, 600), "tall#1.jpg": (500, 900), "alpha.png": (700, 700),
                     "small.jpg": (100, 80)}
        for path, file_uri in zip(files, uris):
            name = os.path.basename(path)
            thumbnail = self.thumbnail_path(file_uri)
            png = PNG(thumbnail)
            info = os.stat(path)
            # RGBA, 8 bits, fitted in the box (never enlarged)
            self.assertEqual((png.bit_depth, png.color_type), (8, 6), name)
            self.assertAlmostEqual(png.width, boxes[name][0], delta=1, msg=name)
            self.assertAlmostEqual(png.height, boxes[name][1], delta=1, msg=name)
            self.assertEqual(png.keys["Thumb::URI"], file_uri)
            self.assertEqual(png.keys["Thumb::MTime"], str(int(info.st_mtime)))
            self.assertEqual(png.keys["Thumb::Size"], str(info.st_size))
            self.assertEqual(png.keys["Thumb::Mimetype"], "image/png" if name.endswith(".png") else "image/jpeg")
            self.assertEqual((png.keys["Thumb::Image::Width"], png.keys["Thumb::Image::Height"]),
                             tuple(str(n) for n in originals[name]))
            self.assertEqual(png.keys["Software"], f"viewerd {version}")
            # the keys come before the pixels, where readers that stop early find them
            self.assertLess(png.chunks.index("tEXt"), png.chunks.index("IDAT"))
            self.assertEqual(stat.S_IMODE(os.stat(thumbnail).st_mode), 0o600)
        for directory in [self.cache, os.path.join(self.cache, "large")]:
            self.assertEqual(stat.S_IMODE(os.stat(directory).st_mode), 0o700)
        self.assertEqual([n for n in os.listdir(os.path.join(self.cache, "large")) if not n.endswith(".png")], [])

    def test_a_video_thumbnail_has_its_length_and_a_photo_none(self) -> None:
        # Given a 3 s clip (ffmpeg, as the other video tests make them) and a photo
        clip = os.path.join(self.images, "clip 3s.mp4")
        subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=320x240:rate=10:duration=3", "-c:v", "libx264", "-pix_fmt", "yuv420p", clip],
                       check=True, timeout=60)
        photo = self.photo("still.jpg")

        # When both are queued
        outcome = self.client.wait(self.client.queue([uri(clip), uri(photo)], flavor="large"))

        # Then the clip's thumbnail says its length in whole seconds (Thumb::Movie::Length),
        # the photo's says none
        self.assertEqual(outcome["errors"], [])
        video = PNG(self.thumbnail_path(uri(clip)))
        self.assertEqual(video.keys.get("Thumb::Movie::Length"), "3", video.keys)
        self.assertEqual(video.keys["Thumb::Mimetype"], "video/mp4")
        self.assertNotIn("Thumb::Movie::Length", PNG(self.thumbnail_path(uri(photo))).keys)

    def test_every_flavor_has_its_box(self) -> None:
        path = self.photo("flavors.jpg", 2400, 1600)
        for flavor, side in [("normal", 128), ("large", 256), ("x-large", 512), ("xx-large", 1024)]:
            outcome = self.client.wait(self.client.queue([uri(path)], flavor=flavor))
            self.assertEqual(outcome["ready"], [uri(path)], flavor)
            png = PNG(self.thumbnail_path(path, flavor))
            self.assertEqual(png.width, side, flavor)
            self.assertAlmostEqual(png.height, side * 2 / 3, delta=1, msg=flavor)

    def test_a_valid_thumbnail_is_reused_and_a_stale_one_made_again(self) -> None:
        path = self.photo("reuse.jpg", 800, 600)
        self.assertEqual(self.client.wait(self.client.queue([uri(path)]))["ready"], [uri(path)])
        before = self.renders()

        # When it is queued again, unchanged: Ready, and the daemon renders nothing
        again = self.client.wait(self.client.queue([uri(path)], scheduler="background"))
        self.assertEqual(again["ready"], [uri(path)])
        self.assertEqual(self.renders(), before)

        # When the file changes (another mtime), the thumbnail is made again
        make_jpeg(path, 800, 600)
        later = time.time() + 5
        os.utime(path, (later, later))
        self.assertEqual(self.client.wait(self.client.queue([uri(path)]))["ready"], [uri(path)])
        self.assertEqual(self.renders(), before + 1)
        self.assertEqual(PNG(self.thumbnail_path(path)).keys["Thumb::MTime"], str(int(later)))

    def test_errors_carry_tumblers_codes_and_nothing_is_lost(self) -> None:
        good = self.photo("good.jpg")
        corrupt = os.path.join(self.images, "corrupt.jpg")
        with open(corrupt, "wb") as f:
            f.write(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes((i * 37 + 11) % 256 for i in range(4000)))
        missing = os.path.join(self.images, "missing.jpg")
        os.makedirs(os.path.join(self.cache, "normal"), exist_ok=True)
        inside = os.path.join(self.cache, "normal", "inside.jpg")
        shutil.copy(good, inside)
        uris = [uri(good), "http://example.com/a.jpg", "sftp://host/b.png", uri(missing), uri(corrupt), uri(inside)]

        outcome = self.client.wait(self.client.queue(uris))

        self.assertEveryFileAnswered(outcome, uris)
        self.assertEqual(outcome["ready"], [uri(good)])
        codes = {e["uri"]: e["code"] for e in outcome["errors"]}
        self.assertEqual(codes, {"http://example.com/a.jpg": 0, "sftp://host/b.png": 0, uri(missing): 8,
                                 uri(corrupt): 2, uri(inside): 3})
        for error in outcome["errors"]:
            self.assertTrue(error["message"])
        # the corrupt file's failure is recorded as the standard says, and answered from it
        failure = os.path.join(self.cache, "fail", f"viewerd-{self.version()}", md5_name(uri(corrupt)))
        self.assertEqual(PNG(failure).keys["Thumb::URI"], uri(corrupt))
        before = self.renders()
        again = self.client.wait(self.client.queue([uri(corrupt)]))
        self.assertEqual([e["code"] for e in again["errors"]], [6])
        self.assertEqual(self.renders(), before)
        # nothing was written for the missing file or the thumbnail
        self.assertFalse(os.path.exists(self.thumbnail_path(missing)))
        self.assertFalse(os.path.exists(self.thumbnail_path(inside)))

    def test_the_thumbnail_goes_under_the_uri_as_the_caller_spelled_it(self) -> None:
        path = self.photo("a,b(1).jpg")
        spellings = [uri(path), "file://localhost" + path, uri(path).replace(",", "%2C").replace("(", "%28")]
        self.assertEqual(len(set(spellings)), 3)
        outcome = self.client.wait(self.client.queue(spellings + [spellings[0]], flavor="normal"))
        # each answered once (the repeated one too), each where its own MD5 says
        self.assertEqual(sorted(outcome["ready"]), sorted(spellings), outcome)
        for spelled in spellings:
            self.assertEqual(PNG(self.thumbnail_path(spelled, "normal")).keys["Thumb::URI"], spelled)

    def test_a_uri_of_another_host_is_refused(self) -> None:
        path = self.photo("remote.jpg")
        outcome = self.client.wait(self.client.queue(["file://otherhost" + path]))
        self.assertEqual([e["code"] for e in outcome["errors"]], [0])

    def test_an_unsupported_flavor_is_started_refused_and_finished(self) -> None:
        path = self.photo("flavorless.jpg")
        handle = self.client.queue([uri(path), "http://x/y.jpg"], flavor="huge")
        outcome = self.client.wait(handle)
        self.assertTrue(outcome["started"])
        self.assertEveryFileAnswered(outcome, [uri(path), "http://x/y.jpg"])
        self.assertEqual({e["code"] for e in outcome["errors"]}, {5})

    def test_an_empty_queue_is_started_and_finished(self) -> None:
        outcome = self.client.wait(self.client.queue([]))
        self.assertTrue(outcome["started"] and outcome["finished"])

    def test_signals_go_to_the_caller_alone(self) -> None:
        other = Thumbnailer()
        self.addCleanup(other.close)
        path = self.photo("mine.jpg")
        handle = self.client.queue([uri(path)])
        self.client.wait(handle)
        other.pump(lambda: False, timeout=0.3)
        self.assertEqual([s for s in other.signals if s[1][0] == handle], [])


class CancellationTests(ConformanceCase):
    def batch(self, prefix: str, count: int):
        return [self.photo(f"{prefix}{i}.jpg", 2600, 1900) for i in range(count)]

    def test_dequeue_mid_batch_finishes_without_errors(self) -> None:
        files = self.batch("dq", 14)
        uris = [uri(f) for f in files]
        handle = self.client.queue(uris, scheduler="background")
        self.assertTrue(self.client.pump(lambda: self.client.outcome(handle)["ready"], 60))

        self.client.dequeue(handle)
        outcome = self.client.wait(handle)

        self.assertTrue(outcome["finished"])
        self.assertEqual(outcome["errors"], [])
        self.assertLess(len(outcome["ready"]), len(uris))
        # and nothing more comes for it
        count = len(self.client.signals)
        self.client.pump(lambda: False, timeout=1.0)
        self.assertEqual([s for s in self.client.signals[count:] if s[1][0] == handle], [])

    def test_handle_to_unqueue_replaces_the_old_request_in_one_step(self) -> None:
        files = self.batch("uq", 10)
        old = self.client.queue([uri(f) for f in files], scheduler="background")
        newer = self.photo("uq-new.jpg", 2600, 1900)
        wanted = [uri(files[-1]), uri(files[-2]), uri(newer)]
        before = self.renders()

        handle = self.client.queue(wanted, scheduler="foreground", unqueue=old)
        outcome = self.client.wait(handle)
        old_outcome = self.client.wait(old)

        self.assertEveryFileAnswered(outcome, wanted)
        self.assertEqual(outcome["errors"], [])
        self.assertTrue(old_outcome["finished"])
        self.assertEqual(old_outcome["errors"], [])
        self.assertLess(self.renders() - before, len(files) + 1)
        # the files both asked for were made once, for the new request
        for file_uri in wanted:
            self.assertTrue(os.path.exists(self.thumbnail_path(file_uri)))

    def test_a_client_cannot_dequeue_another_clients_request(self) -> None:
        other = Thumbnailer()
        self.addCleanup(other.close)
        files = self.batch("theirs", 4)
        handle = self.client.queue([uri(f) for f in files])
        other.dequeue(handle)
        outcome = self.client.wait(handle)
        self.assertEqual(sorted(outcome["ready"]), sorted(uri(f) for f in files))

    def test_two_clients_queueing_the_same_files_decode_each_once(self) -> None:
        other = Thumbnailer()
        self.addCleanup(other.close)
        files = self.batch("shared", 6)
        uris = [uri(f) for f in files]
        before = self.renders()

        first = self.client.queue(uris, scheduler="background")
        second = other.queue(list(reversed(uris)), scheduler="foreground")
        mine, theirs = self.client.wait(first), other.wait(second)

        self.assertEqual(sorted(mine["ready"]), sorted(uris))
        self.assertEqual(sorted(theirs["ready"]), sorted(uris))
        self.assertEqual(self.renders() - before, len(files))

    def test_the_files_of_a_caller_that_leaves_are_still_made(self) -> None:
        files = self.batch("gone", 4)
        leaving = Thumbnailer()
        leaving.queue([uri(f) for f in files])
        leaving.close()
        deadline = time.monotonic() + 60
        while not all(os.path.exists(self.thumbnail_path(f)) for f in files) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertTrue(all(os.path.exists(self.thumbnail_path(f)) for f in files))


class Cache1Tests(ConformanceCase):
    def thumbnails(self, *paths: str) -> None:
        outcome = self.client.wait(self.client.queue([uri(p) for p in paths], flavor="normal"))
        self.assertEqual(outcome["errors"], [])

    def test_move_copy_delete_follow_the_files(self) -> None:
        a, b = self.photo("a.jpg"), self.photo("b.jpg")
        self.thumbnails(a, b)
        moved = os.path.join(self.images, "a moved.jpg")
        os.rename(a, moved)

        self.client.cache("Move", "(asas)", ([uri(a)], [uri(moved)]))
        self.assertFalse(os.path.exists(self.thumbnail_path(a, "normal")))
        self.assertEqual(PNG(self.thumbnail_path(moved, "normal")).keys["Thumb::URI"], uri(moved))

        copied = os.path.join(self.images, "b copy.jpg")
        shutil.copy2(b, copied)
        self.client.cache("Copy", "(asas)", ([uri(b)], [uri(copied)]))
        self.assertEqual(PNG(self.thumbnail_path(b, "normal")).keys["Thumb::URI"], uri(b))
        self.assertEqual(PNG(self.thumbnail_path(copied, "normal")).keys["Thumb::URI"], uri(copied))

        self.client.cache("Delete", "(as)", ([uri(copied)],))
        self.assertFalse(os.path.exists(self.thumbnail_path(copied, "normal")))
        self.assertTrue(os.path.exists(self.thumbnail_path(b, "normal")))

    def test_a_moved_folder_takes_its_thumbnails_along(self) -> None:
        folder = os.path.join(self.images, "album")
        os.makedirs(folder)
        inner = [make_jpeg(os.path.join(folder, n), 300, 200) for n in ("x.jpg", "y.jpg")]
        self.thumbnails(*inner)
        renamed = os.path.join(self.images, "album 2024")
        os.rename(folder, renamed)

        self.client.cache("Move", "(asas)", ([uri(folder)], [uri(renamed)]))

        for path in inner:
            now = os.path.join(renamed, os.path.basename(path))
            self.assertFalse(os.path.exists(self.thumbnail_path(path, "normal")))
            self.assertEqual(PNG(self.thumbnail_path(now, "normal")).keys["Thumb::URI"], uri(now))

    def test_cleanup_removes_thumbnails_of_files_gone_and_keeps_the_rest(self) -> None:
        folder = os.path.join(self.images, "cleanup")
        os.makedirs(folder)
        kept, gone = (make_jpeg(os.path.join(folder, n), 300, 200) for n in ("kept.jpg", "gone.jpg"))
        outside = self.photo("outside.jpg")
        self.thumbnails(kept, gone, outside)
        os.unlink(gone)
        os.unlink(outside)

        self.client.cache("Cleanup", "(asu)", ([uri(folder)], 0))

        self.assertTrue(os.path.exists(self.thumbnail_path(kept, "normal")))
        self.assertFalse(os.path.exists(self.thumbnail_path(gone, "normal")))
        self.assertTrue(os.path.exists(self.thumbnail_path(outside, "normal")))  # not under the base


class DesktopThumbnailerTests(ConformanceCase):
    """The desktop's own thumbnailers (.thumbnailer files) for the types viewerd does not read:
    here test ones, in a data directory of their own (XDG_DATA_DIRS)."""

    front_arguments = ("--helper-timeout", "4", "--helper-jobs", "2")

    @classmethod
    def front_environment(cls):
        share = os.path.join(cls.root, "share")
        helpers = os.path.join(share, "thumbnailers")
        os.makedirs(helpers)
        scripts = {
            # a real one: the file's first words drawn by the vips CLI, as big as asked
            "text": ("text/plain", '#!/bin/sh\nexec vips text "$2" "$(head -c 24 "$1")" --width "$3" --dpi 300\n'),
            "slow": ("application/x-viewerd-slow", "#!/bin/sh\nsleep 67.25\n"),
            # works in half a second, and says how many ran at once in its thumbnail's width (64
            # pixels a helper): its sandbox lets it write beside its output alone, and read the
            # directories of the helpers running beside it
            "busy": ("application/x-viewerd-busy",
                     '#!/bin/sh\nhere=$(dirname "$2")\ntouch "$here/running"\nsleep 0.25\n'
                     'n=$(ls "$(dirname "$here")"/*/running | wc -l)\nsleep 0.25\nrm "$here/running"\n'
                     'exec vips black "$2" $((64 * n)) 48\n'),
            # tries what its sandbox is there to stop, and says what it could do (as its last words)
            "nosy": ("application/x-viewerd-nosy", cls.nosy_script()),
            "junk": ("application/x-viewerd-junk", '#!/bin/sh\necho "not a PNG" > "$2"\n'),
            "fails": ("application/x-viewerd-fails", '#!/bin/sh\necho "cannot parse the document" >&2\nexit 3\n'),
        }
        for name, (mime, script) in scripts.items():
            program = os.path.join(helpers, name + ".sh")
            with open(program, "w") as f:
                f.write(script)
            os.chmod(program, 0o755)
            with open(os.path.join(helpers, name + ".thumbnailer"), "w") as f:
                f.write(f"[Thumbnailer Entry]\nTryExec={program}\nExec={program} %i %o %s\nMimeType={mime};\n")
        # one whose program is not installed is left out
        with open(os.path.join(helpers, "absent.thumbnailer"), "w") as f:
            f.write("[Thumbnailer Entry]\nTryExec=no-such-thumbnailer\nExec=no-such-thumbnailer %i %o\n"
                    "MimeType=application/x-viewerd-absent;\n")
        return {"XDG_DATA_DIRS": share, "XDG_DATA_HOME": os.path.join(cls.root, "no-data-home")}

    @classmethod
    def nosy_script(cls) -> str:
        """A helper that tries the network (a TCP listener on 127.0.0.1, a Unix socket as the
        session bus is one), a write outside its directory, a signal to the service, and looks
        at its TMPDIR."""
        cls.tcp = socket.create_server(("127.0.0.1", 0))
        cls.unix_path = os.path.join(cls.root, "listener.sock")
        cls.unix = socket.socket(socket.AF_UNIX)
        cls.unix.bind(cls.unix_path)
        cls.unix.listen()
        cls.escaped = os.path.join(cls.root, "written-by-a-helper")
        return f"""#!/usr/bin/python3 -S
import os, socket, stat, sys, tempfile
report = []
def attempt(name, act):
    try:
        act()
        report.append(name + "=done")
    except OSError as error:
        report.append(name + "=refused")
attempt("tcp", lambda: socket.create_connection(("127.0.0.1", {cls.tcp.getsockname()[1]}), timeout=5))
attempt("unix", lambda: socket.socket(socket.AF_UNIX).connect({cls.unix_path!r}))
attempt("outside", lambda: open({cls.escaped!r}, "w").write("escaped"))
attempt("signal", lambda: os.kill(os.getppid(), 0))
def private_temporary():
    info = os.stat(tempfile.gettempdir())
    assert os.path.dirname(sys.argv[2]) in tempfile.gettempdir() and stat.S_IMODE(info.st_mode) == 0o700
    tempfile.mkstemp()
try:
    private_temporary()
    report.append("tmp=private")
except (AssertionError, OSError):
    report.append("tmp=shared")
print("report: " + " ".join(report), file=sys.stderr)
sys.exit(3)
"""

    @classmethod
    def tearDownClass(cls) -> None:
        super().tearDownClass()
        cls.tcp.close()
        cls.unix.close()

    def document(self, name: str, text: str) -> str:
        path = os.path.join(self.images, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def test_a_type_viewerd_does_not_read_is_thumbnailed_by_the_desktops_thumbnailer(self) -> None:
        notes = self.document("notes.txt", "Shopping: bread, milk\n")
        outcome = self.client.wait(self.client.queue([uri(notes)], [""], "large"))
        self.assertEqual(outcome["ready"], [uri(notes)], outcome)
        png = PNG(self.thumbnail_path(notes))
        self.assertEqual((png.bit_depth, png.color_type), (8, 6))
        self.assertLessEqual(max(png.width, png.height), 256)
        self.assertGreater(png.width, 50)
        self.assertEqual(png.keys["Thumb::Mimetype"], "text/plain")  # guessed as the desktop does
        self.assertEqual(png.keys["Thumb::URI"], uri(notes))

    def test_supported_types_include_the_thumbnailers_installed(self) -> None:
        _, types = self.client.call("GetSupported", None, None, "(asas)")
        self.assertIn("text/plain", types)
        self.assertIn("application/x-viewerd-fails", types)
        self.assertNotIn("application/x-viewerd-absent", types)

    def test_a_thumbnailer_that_hangs_fails_or_writes_junk_is_an_error_and_recorded(self) -> None:
        files = {mime: self.document(f"doc-{mime.rsplit('-', 1)[1]}", "a document of some kind\n")
                 for mime in ["application/x-viewerd-slow", "application/x-viewerd-junk", "application/x-viewerd-fails"]}
        started = time.monotonic()
        outcome = self.client.wait(self.client.queue([uri(p) for p in files.values()], list(files)))
        self.assertLess(time.monotonic() - started, 30)
        self.assertEveryFileAnswered(outcome, [uri(p) for p in files.values()])
        messages = {e["uri"]: (e["code"], e["message"]) for e in outcome["errors"]}
        self.assertEqual({code for code, _ in messages.values()}, {6})
        self.assertIn("killed", messages[uri(files["application/x-viewerd-slow"])][1])
        self.assertIn("cannot parse the document", messages[uri(files["application/x-viewerd-fails"])][1])
        self.assertIn("exited with 3", messages[uri(files["application/x-viewerd-fails"])][1])
        self.assertIn("no image", messages[uri(files["application/x-viewerd-junk"])][1])
        # the helper's fault is recorded (not run again until the file changes); a timeout is not
        fails = self.client.wait(self.client.queue([uri(files["application/x-viewerd-fails"])], ["application/x-viewerd-fails"]))
        self.assertIn("before", fails["errors"][0]["message"])
        slow = self.client.wait(self.client.queue([uri(files["application/x-viewerd-slow"])], ["application/x-viewerd-slow"]))
        self.assertIn("killed", slow["errors"][0]["message"])
        # and the killed helpers' process groups are gone, children included
        self.assertEqual(subprocess.run(["pgrep", "-f", "sleep 67.25"], capture_output=True, text=True).stdout.strip(), "")

    def test_helpers_run_one_per_core_and_a_dequeue_stops_one(self) -> None:
        # Given more files for a half-second helper than there are cores
        files = [self.document(f"busy{i}", "busy") for i in range(6)]
        outcome = self.client.wait(self.client.queue([uri(p) for p in files], ["application/x-viewerd-busy"] * 6))
        self.assertEqual(sorted(outcome["ready"]), sorted(uri(p) for p in files), outcome)
        # Then no more of them ran at once than there are cores (each says how many it saw)
        seen = [PNG(self.thumbnail_path(p)).width // 64 for p in files]
        self.assertEqual(max(seen), 2, seen)  # in parallel, and no more than --helper-jobs

        # When a file whose helper hangs is dequeued, the helper is killed at once
        slow = self.document("hang", "zzz")
        handle = self.client.queue([uri(slow)], ["application/x-viewerd-slow"])
        deadline = time.monotonic() + 10
        while not subprocess.run(["pgrep", "-f", "sleep 67.25"], capture_output=True).stdout and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertTrue(subprocess.run(["pgrep", "-f", "sleep 67.25"], capture_output=True).stdout, "the helper never ran")
        self.client.dequeue(handle)
        outcome = self.client.wait(handle)
        self.assertEqual(outcome["errors"], [])
        # well before its 4 s timeout would have
        deadline = time.monotonic() + 1
        while subprocess.run(["pgrep", "-f", "sleep 67.25"], capture_output=True).stdout and time.monotonic() < deadline:
            time.sleep(0.02)
        self.assertEqual(subprocess.run(["pgrep", "-f", "sleep 67.25"], capture_output=True, text=True).stdout.strip(), "")

    def test_a_thumbnailer_has_no_network_no_signals_and_writes_only_beside_its_output(self) -> None:
        # Given a helper that tries what a compromised one would
        nosy = self.document("nosy.doc", "a document\n")

        # When it runs
        outcome = self.client.wait(self.client.queue([uri(nosy)], ["application/x-viewerd-nosy"]))

        # Then it reached no socket, wrote nothing outside its directory, signalled no one, and
        # had a temporary directory of its own
        self.assertEqual(len(outcome["errors"]), 1, outcome)
        report = dict(part.split("=") for part in outcome["errors"][0]["message"].split("report: ", 1)[-1].split())
        expected = {"tcp": "refused", "unix": "refused", "outside": "refused", "signal": "refused", "tmp": "private"}
        # (what this kernel's Landlock cannot do is not asked: writes before 5.13, signals before 6.12)
        abi = landlock_abi()
        if abi < 1:
            del expected["outside"]
        if abi < 6:
            del expected["signal"]
        self.assertEqual({key: report.get(key) for key in expected}, expected, outcome)
        if abi >= 1:
            self.assertFalse(os.path.exists(self.escaped))
        for listener in (self.tcp, self.unix):
            listener.setblocking(False)
            with self.assertRaises(BlockingIOError):
                listener.accept()[0].close()
        # and a helper that keeps to its directory still works in the same sandbox (its run dir gone after)
        notes = self.document("sandboxed.txt", "Still drawn\n")
        self.assertEqual(self.client.wait(self.client.queue([uri(notes)], [""], "normal"))["ready"], [uri(notes)])

    def test_a_type_no_one_reads_is_unsupported(self) -> None:
        blob = os.path.join(self.images, "blob.bin")
        with open(blob, "wb") as f:
            f.write(bytes(range(256)) * 8)
        outcome = self.client.wait(self.client.queue([uri(blob)]))
        self.assertEqual([e["code"] for e in outcome["errors"]], [0])


class LifecycleTests(unittest.TestCase):
    """Each with its own daemon, service or bus."""

    def setUp(self) -> None:
        require_session_bus()
        front_executable()
        self.daemon = Daemon().start()
        self.addCleanup(self.daemon.cleanup)
        self.cache = os.path.join(self.daemon.root, "thumbnails")

    def test_a_stopping_service_answers_everything_queued(self) -> None:
        front = Front(self.daemon.socket, self.cache)
        self.addCleanup(front.stop)
        files = [make_jpeg(os.path.join(self.daemon.root, f"s{i}.jpg"), 3000, 2200) for i in range(16)]
        client = Thumbnailer()
        self.addCleanup(client.close)
        handle = client.queue([uri(f) for f in files], scheduler="background")
        client.pump(lambda: client.outcome(handle)["started"], 10)

        self.assertEqual(front.stop(), 0)
        outcome = client.wait(handle, 20)

        self.assertTrue(outcome["finished"])
        answered = outcome["ready"] + [e["uri"] for e in outcome["errors"]]
        self.assertEqual(sorted(answered), sorted(uri(f) for f in files))
        self.assertTrue({e["code"] for e in outcome["errors"]} <= {7})
        self.assertGreater(len(outcome["errors"]), 0, "stopped after every file was done: the test tested nothing")

    def test_a_second_service_does_not_take_the_names(self) -> None:
        front = Front(self.daemon.socket, self.cache)
        self.addCleanup(front.stop)
        second = subprocess.run([front_executable(), "--socket", self.daemon.socket, "--cache", self.cache],
                                capture_output=True, text=True, timeout=30)
        self.assertEqual(second.returncode, 1)
        self.assertIn("owned by another service", second.stderr)
        self.assertIn(f"pid {front.process.pid}", second.stderr)

    def test_tumbler_started_later_does_not_take_the_names(self) -> None:
        import glob
        tumblerd = next(iter(glob.glob("/usr/lib/*/tumbler-1/tumblerd")), "")
        if not os.access(tumblerd, os.X_OK):
            self.skipTest("tumbler is not installed (make test-deps installs it)")
        front = Front(self.daemon.socket, self.cache)
        self.addCleanup(front.stop)
        home = os.path.join(self.daemon.root, "tumbler-home")
        os.makedirs(home)
        tumbler = subprocess.Popen([tumblerd], env=dict(os.environ, HOME=home, XDG_CACHE_HOME=home + "/cache"),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.addCleanup(tumbler.wait)
        self.addCleanup(tumbler.kill)
        try:
            tumbler.wait(5)  # it cannot own its names: it leaves
        except subprocess.TimeoutExpired:
            pass
        client = Thumbnailer()
        self.addCleanup(client.close)
        self.assertEqual(name_owner_pid(client), front.process.pid)
        self.assertEqual(name_owner_pid(client, "org.freedesktop.thumbnails.Cache1"), front.process.pid)
        path = make_jpeg(os.path.join(self.daemon.root, "after-tumbler.jpg"), 320, 240)
        self.assertEqual(client.wait(client.queue([uri(path)]))["ready"], [uri(path)])

    def test_the_first_queue_activates_the_service_and_it_leaves_when_idle(self) -> None:
        # Given a bus of its own whose service directory has the shipped activation file
        # (dbus/), pointing at the built program, idle after a second instead of ten minutes
        root = self.daemon.root
        services = os.path.join(root, "services")
        os.makedirs(services)
        name = "org.freedesktop.thumbnails.Thumbnailer1.service"
        with open(os.path.join(REPO, "dbus", name)) as f:
            shipped = f.read()
        self.assertIn("Exec=/usr/local/bin/viewerd-thumbnailer --idle-exit 600\n", shipped)
        with open(os.path.join(services, name), "w") as f:
            f.write(shipped.replace("/usr/local/bin/viewerd-thumbnailer", front_executable())
                    .replace("--idle-exit 600", "--idle-exit 1"))
        config = os.path.join(root, "bus.conf")
        with open(config, "w") as f:
            f.write(f"""<busconfig><include>{REPO}/dbus/private-session.conf</include>
<servicedir>{services}</servicedir></busconfig>""")
        # (what the bus starts inherits its environment: the daemon's socket, the cache)
        environment = dict(os.environ, VIEWERD_SOCKET=self.daemon.socket, XDG_CACHE_HOME=os.path.join(root, "xdg"))
        bus = subprocess.Popen(["dbus-daemon", "--config-file", config, f"--address=unix:path={root}/bus", "--nofork",
                                "--print-address"],
                               stdout=subprocess.PIPE, text=True, env=environment)
        self.addCleanup(bus.stdout.close)
        self.addCleanup(bus.wait)
        self.addCleanup(bus.terminate)
        address = bus.stdout.readline().strip()
        client = Thumbnailer(address)
        self.addCleanup(client.close)
        path = make_jpeg(os.path.join(root, "activated.jpg"), 640, 480)

        # When a client queues with no service running, the bus starts it
        outcome = client.wait(client.queue([uri(path)]))
        self.assertEqual(outcome["ready"], [uri(path)])
        self.assertTrue(os.path.exists(os.path.join(root, "xdg", "thumbnails", "large", md5_name(uri(path)))))
        first = client.call("GetConnectionUnixProcessID", "(s)", (NAME,), "(u)", name="org.freedesktop.DBus",
                            path="/org/freedesktop/DBus")[0]

        # Then, idle for its idle time, it leaves the bus; the next queue starts it again
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and os.path.exists(f"/proc/{first}"):
            time.sleep(0.05)
        self.assertFalse(os.path.exists(f"/proc/{first}") and open(f"/proc/{first}/stat").read().split()[2] != "Z")
        again = client.wait(client.queue([uri(path)], flavor="normal"))
        self.assertEqual(again["ready"], [uri(path)])


if __name__ == "__main__":
    unittest.main()
