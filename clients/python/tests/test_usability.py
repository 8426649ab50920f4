"""What a newcomer meets first (review of 8439786, points 23 to 28): no daemon, printing answers."""
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


class PrintingTests(unittest.TestCase):
    """print() of an answer shows what it is, not its bytes; enums print their names."""

    def test_a_result_without_its_bytes(self) -> None:
        info = p.InfoReply(p.MediaKind.PHOTO, 800, 600, 0, 1, 1, "jpeg", False)
        result = p.Result(p.Format.WEBP, 256, 192, b"\x00" * 5986, True, info)
        text = repr(result)
        self.assertEqual(text, "Result(format=<Format.WEBP: 2>, width=256, height=192, data=<5986 bytes>, "
                               "from_cache=True, source=InfoReply(kind=<MediaKind.PHOTO: 0>, width=800, height=600, "
                               "duration_ms=0, frames=1, pages=1, format='jpeg', has_alpha=False))")
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
        self.assertEqual(str(p.Capability(0x202)), "previews|0x200")  # a newer daemon's bit


if __name__ == "__main__":
    unittest.main()
