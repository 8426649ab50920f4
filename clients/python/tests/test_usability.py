"""What a newcomer meets first (review of 8439786, points 23 to 28): no daemon, a video's frame
by time, printing answers, a bad option value, a relative path."""
from __future__ import annotations

import asyncio
import errno
import os
import socket
import subprocess
import tempfile
import unittest

import support
from support import DaemonTestCase
import viewerd
from viewerd import protocol as p


class NoDaemonTests(unittest.TestCase):
    """Nothing listens: ``viewerd.DaemonUnavailable`` naming the socket tried, whatever the
    reason, from both clients, caught as a viewerd error and as a ConnectionError."""

    def setUp(self) -> None:
        self.root = tempfile.mkdtemp(prefix="viewerd-py-none-")
        os.chmod(self.root, 0o700)
        self.addCleanup(os.rmdir, self.root)

    def check(self, raised: BaseException, path: str, code: int) -> None:
        self.assertIsInstance(raised, viewerd.DaemonUnavailable)
        self.assertIsInstance(raised, viewerd.ViewerError)
        self.assertIsInstance(raised, ConnectionError)
        self.assertEqual(raised.socket_path, path)
        self.assertEqual(raised.errno, code)
        self.assertEqual(str(raised), f"viewerd is not available at {path}: {os.strerror(code)}")
        self.assertTrue(raised.retryable)
        self.assertEqual(raised.name, "daemon-unavailable")

    def cases(self):  # type: ignore[no-untyped-def]
        """(socket path, errno): no socket, no directory, a socket nobody listens on."""
        stale = os.path.join(self.root, "stale.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(stale)
        listener.close()  # bound, never listening: connect is refused
        self.addCleanup(os.unlink, stale)
        return [(os.path.join(self.root, "viewerd.sock"), errno.ENOENT),
                (os.path.join(self.root, "missing", "viewerd.sock"), errno.ENOENT),
                (stale, errno.ECONNREFUSED)]

    def test_the_blocking_client(self) -> None:
        for path, code in self.cases():
            with self.subTest(path=path):
                with self.assertRaises(viewerd.ViewerError) as caught:
                    with viewerd.Client(path) as client:
                        client.render("/x.jpg", 256)
                self.check(caught.exception, path, code)
                with self.assertRaises(ConnectionError) as caught:
                    viewerd.Client(path).render("/x.jpg", 256)
                self.check(caught.exception, path, code)

    def test_the_asyncio_client(self) -> None:
        for path, code in self.cases():
            with self.subTest(path=path):
                async def scenario() -> None:
                    async with viewerd.AsyncClient(path) as client:
                        await client.render("/x.jpg", 256)
                with self.assertRaises(viewerd.ViewerError) as caught:
                    asyncio.run(scenario())
                self.check(caught.exception, path, code)

    def test_the_default_socket_is_named(self) -> None:
        path = os.path.join(self.root, "env.sock")
        saved = os.environ.get("VIEWERD_SOCKET")
        os.environ["VIEWERD_SOCKET"] = path
        try:
            with self.assertRaises(viewerd.DaemonUnavailable) as caught:
                viewerd.Client().ping()
        finally:
            if saved is None:
                del os.environ["VIEWERD_SOCKET"]
            else:
                os.environ["VIEWERD_SOCKET"] = saved
        self.check(caught.exception, path, errno.ENOENT)

    def test_a_listener_that_closes_before_welcome(self) -> None:
        """Something listens but hangs up on HELLO: unavailable too, as Swift's client says."""
        import threading
        path = os.path.join(self.root, "closer.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen()
        listener.settimeout(30)
        self.addCleanup(os.unlink, path)
        self.addCleanup(listener.close)

        def serve(count: int) -> None:
            for _ in range(count):
                conn, _ = listener.accept()
                conn.recv(4096)
                conn.close()

        thread = threading.Thread(target=serve, args=(2,), daemon=True)
        thread.start()
        with self.assertRaises(viewerd.DaemonUnavailable) as caught:
            viewerd.Client(path).connect()
        self.assertEqual(str(caught.exception), f"viewerd is not available at {path}: "
                                                "it closed the connection before its WELCOME")

        async def scenario() -> None:
            await viewerd.AsyncClient(path).connect()
        with self.assertRaises(viewerd.DaemonUnavailable) as caught:
            asyncio.run(asyncio.wait_for(scenario(), 30))
        thread.join()
        self.assertEqual(caught.exception.socket_path, path)

    def test_every_error_of_the_client_is_a_viewer_error(self) -> None:
        """One ``except viewerd.ViewerError`` catches what the package raises about the daemon."""
        for kind in (viewerd.DaemonUnavailable, viewerd.ConnectionLost, viewerd.UntrustedSocket):
            self.assertTrue(issubclass(kind, viewerd.ViewerError), kind)
        self.assertTrue(issubclass(viewerd.ConnectionLost, ConnectionError))
        self.assertTrue(issubclass(viewerd.UntrustedSocket, PermissionError))
        lost = viewerd.ConnectionLost("viewerd closed the connection")
        self.assertEqual((lost.code, lost.name, lost.retryable, str(lost)),
                         (None, "connection-lost", True, "viewerd closed the connection"))


class DaemonGoneTests(unittest.TestCase):
    def test_a_stopped_daemon_is_lost_once_then_unavailable_then_back(self) -> None:
        daemon = support.Daemon().start()
        self.addCleanup(daemon.cleanup)
        client = viewerd.Client(daemon.socket)
        self.addCleanup(client.close)
        client.ping()
        daemon.stop()
        with self.assertRaises(viewerd.ConnectionLost):
            client.ping()
        with self.assertRaises(viewerd.DaemonUnavailable) as caught:
            client.ping()
        self.assertEqual(caught.exception.socket_path, daemon.socket)
        daemon.start()
        client.ping()


class OptionValueTests(unittest.TestCase):
    """A bad value is a ValueError that lists the valid ones, before anything is sent."""

    def test_bad_names_list_the_valid_values(self) -> None:
        client = viewerd.Client("/nonexistent/viewerd.sock")  # never reached
        cases = {"format": ("tiff", "jpeg, webp, png, avif, raw, gif"),
                 "priority": ("urgent", "visible, high, normal, prefetch, background"),
                 "fit": ("cover", "fit, fill, stretch"),
                 "crop": ("middle", "centre, attention, entropy"),
                 "delivery": ("eventually", "final, opportunistic, cache-only")}
        for option, (value, valid) in cases.items():
            with self.subTest(option=option):
                with self.assertRaises(ValueError) as caught:
                    client.start_render("/x.jpg", 256, **{option: value})
                self.assertEqual(str(caught.exception), f"{option} must be one of {valid} (got {value!r})")
        with self.assertRaises(ValueError) as caught:
            client.start_render("/x.jpg", 256, format=9)
        self.assertEqual(str(caught.exception), "format must be one of jpeg, webp, png, avif, raw, gif (got 9)")
        with self.assertRaises(ValueError) as caught:
            client.prefetch(["/x.jpg"], 256, priority="soon")
        self.assertIn("priority must be one of visible, high", str(caught.exception))

    def test_names_in_any_case_and_enums_are_taken(self) -> None:
        from viewerd._common import make_render, make_spec
        spec = make_spec(256, 256, fit="FILL", crop=p.Crop.ATTENTION, format="WebP", time=2.5)
        self.assertEqual((spec.fit, spec.crop, spec.format, spec.time_ms), (p.Fit.FILL, p.Crop.ATTENTION, p.Format.WEBP, 2500))
        render = make_render("/x.jpg", None, spec, "Background", "cache_only", False)
        self.assertEqual((render.priority, render.delivery), (p.Priority.BACKGROUND, p.Delivery.CACHE_ONLY))

    def test_a_bad_time(self) -> None:
        from viewerd._common import make_spec
        for bad in (-1, -0.001, 5_000_000, float("nan"), "2.5"):
            with self.subTest(time=bad):
                with self.assertRaises((ValueError, TypeError)) as caught:
                    make_spec(256, 256, time=bad)
                self.assertIn("time", str(caught.exception))
        self.assertEqual(make_spec(256, 256, time=0).time_ms, 0)
        self.assertEqual(make_spec(256, 256, time=12.3456).time_ms, 12346)
        self.assertIsNone(make_spec(256, 256).time_ms)


class PrintingTests(unittest.TestCase):
    """print() of an answer shows what it is, not its bytes; enums print their names."""

    def test_a_result_without_its_bytes(self) -> None:
        info = p.InfoReply(p.MediaKind.PHOTO, 800, 600, 0, 1, 1, "jpeg", False)
        result = p.Result(p.Format.WEBP, 256, 192, b"\x00" * 5986, True, info)
        text = repr(result)
        self.assertEqual(text, "Result(format=<Format.WEBP: 2>, width=256, height=192, data=<5986 bytes>, "
                               "from_cache=True, source=InfoReply(kind=<MediaKind.PHOTO: 0>, width=800, height=600, "
                               "duration_ms=0, frames=1, pages=1, format='jpeg', has_alpha=False, hdr=None, "
                               "placeholder=None))")
        self.assertEqual(str(result), text)
        preview = p.Preview(p.Format.JPEG, 64, 48, b"\xff" * 100)
        self.assertEqual(repr(preview), "Preview(format=<Format.JPEG: 1>, width=64, height=48, data=<100 bytes>, "
                                        "from_cache=False, source=None)")
        self.assertEqual(result, p.Result(p.Format.WEBP, 256, 192, b"\x00" * 5986, True, info))  # still compared by value

    def test_enums_print_their_names(self) -> None:
        cases = [(p.Format.JPEG, "jpeg"), (p.MediaKind.PHOTO, "photo"), (p.MediaKind.VIDEO, "video"),
                 (p.Delivery.CACHE_ONLY, "cache-only"), (p.Priority.VISIBLE, "visible"), (p.Fit.FILL, "fill"),
                 (p.Crop.CENTRE, "centre")]
        for value, name in cases:
            with self.subTest(value=value):
                self.assertEqual(str(value), name)
                self.assertEqual(f"{value}", name)
                self.assertEqual(f"{value:>12}", f"{name:>12}")
                self.assertEqual(f"{value:d}", str(int(value)))
        both = p.Capability.PREVIEWS | p.Capability.ZOOM
        self.assertEqual(str(both), "previews|zoom")
        self.assertEqual(str(p.Capability(0)), "none")
        self.assertEqual(str(p.Capability(0x202)), "previews|transforms")
        self.assertEqual(str(p.Capability(0x402)), "previews|0x400")  # a newer daemon's bit
        # A name prints as the string the options take back.
        self.assertIs(viewerd._common._enum(p.Delivery, str(p.Delivery.CACHE_ONLY), "delivery"), p.Delivery.CACHE_ONLY)


class VideoTimeTests(DaemonTestCase):
    """``time=`` seconds, as ``viewerctl render --time``: RENDER's ``time`` in milliseconds."""

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()
        cls.clip = os.path.join(cls.images, "clip.mp4")
        # Black for its first second, then a test pattern (VideoClips.blackThenPattern).
        subprocess.run(["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "lavfi", "-i",
                        "testsrc2=size=320x240:rate=25:duration=4,fade=in:st=1:d=0.04", "-pix_fmt", "yuv420p",
                        cls.clip], check=True)

    def test_the_blocking_client_asks_for_a_frame_by_time(self) -> None:
        with viewerd.Client(self.daemon.socket) as client:
            black = client.render(self.clip, 160, 120, time=0.5, format="png")
            pattern = client.render(self.clip, 160, 120, time=2.5, format="png")
            self.assertFalse(black.from_cache or pattern.from_cache)
            self.assertNotEqual(black.data, pattern.data)
            again = client.start_render(self.clip, 160, 120, time=2.5, format="png").result()
            self.assertTrue(again.from_cache)
            self.assertEqual(again.data, pattern.data)
            # The other clients' frame: viewerctl render --time 2.5 sends 2500 ms.
            self.assertEqual(client.prefetch([self.clip], 160, 120, time=2.5, format="png"), 0)

    def test_the_asyncio_client_asks_for_a_frame_by_time(self) -> None:
        async def scenario() -> None:
            async with viewerd.AsyncClient(self.daemon.socket) as client:
                first = await client.render(self.clip, 100, 100, time=3)
                request = await client.start_render(self.clip, 100, 100, time=3.0)
                second = await request.result()
                self.assertEqual((first.from_cache, second.from_cache), (False, True))
                other = await client.render(self.clip, 100, 100, time=0.25)
                self.assertFalse(other.from_cache)

        asyncio.run(asyncio.wait_for(scenario(), 60))


class RelativePathTests(DaemonTestCase):
    """A relative path is this process's: resolved against the working directory (no symlink
    resolved, ``..`` taken lexically), as viewerctl and Swift's ViewerClient do."""

    def setUp(self) -> None:
        saved = os.getcwd()
        os.chdir(self.images)
        self.addCleanup(os.chdir, saved)

    def test_render_info_prefetch_and_invalidate_by_relative_path(self) -> None:
        self.image("rel.jpg", 400, 300)
        os.makedirs("sub", exist_ok=True)
        with viewerd.Client(self.daemon.socket) as client:
            self.assertEqual(client.render("rel.jpg", 100).width, 100)
            self.assertTrue(client.render(os.path.join(self.images, "rel.jpg"), 100).from_cache)
            self.assertTrue(client.render("sub/../rel.jpg", 100).from_cache)
            self.assertTrue(client.start_render("./rel.jpg", 100).result().from_cache)
            import pathlib
            self.assertTrue(client.render(pathlib.Path("rel.jpg"), 100).from_cache)
            self.assertEqual(client.info("rel.jpg").width, 400)
            self.assertEqual(client.prefetch(["rel.jpg"], 100), 0)  # stored already
            self.assertGreaterEqual(client.invalidate("rel.jpg"), 1)
            self.assertFalse(client.render(os.path.join(self.images, "rel.jpg"), 100).from_cache)
            with self.assertRaises(viewerd.ViewerError) as caught:
                client.render("gone.jpg", 100)
            self.assertEqual(caught.exception.code, 200)
            self.assertIn(os.path.join(self.images, "gone.jpg"), caught.exception.message)

    def test_a_symlinked_directory_is_not_resolved(self) -> None:
        self.image("linked.jpg", 300, 200)
        link = os.path.join(self.daemon.root, "link")
        os.symlink(self.images, link)
        self.addCleanup(os.unlink, link)
        os.chdir(link)
        with viewerd.Client(self.daemon.socket) as client:
            with self.assertRaises(viewerd.ViewerError) as caught:
                client.render("nothing-here.jpg", 64)
        # os.getcwd() is the kernel's (physical) directory, as Foundation's currentDirectoryPath.
        self.assertIn(os.path.join(os.getcwd(), "nothing-here.jpg"), caught.exception.message)

    def test_the_asyncio_client(self) -> None:
        self.image("arel.jpg", 400, 300)

        async def scenario() -> None:
            async with viewerd.AsyncClient(self.daemon.socket) as client:
                self.assertEqual((await client.render("arel.jpg", 90)).width, 90)
                self.assertTrue((await client.render(os.path.join(self.images, "arel.jpg"), 90)).from_cache)
                self.assertEqual((await client.info("./arel.jpg")).height, 300)
                self.assertGreaterEqual(await client.invalidate("arel.jpg"), 1)

        asyncio.run(asyncio.wait_for(scenario(), 60))


if __name__ == "__main__":
    unittest.main()
