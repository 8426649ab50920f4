"""The blocking client against a real viewerd."""
from __future__ import annotations

import os
import socket
import struct
import subprocess
import tempfile
import time
import unittest

import support
from support import DaemonTestCase
import viewerd
from viewerd import protocol as p
from viewerd.socketpath import connect_trusted


class RawConnection:
    """The codec over a plain socket, to see every frame the daemon sends."""

    def __init__(self, path: str) -> None:
        self.sock = connect_trusted(path)
        self.sock.settimeout(30)
        self.decoder = p.FrameDecoder()
        self.frames: list = []
        self.sock.sendall(p.encode(p.Hello(client_name="raw"), 0))
        self.welcome = p.decode(self.next())
        assert isinstance(self.welcome, p.Welcome)

    def next(self) -> p.Frame:
        while not self.frames:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.frames += self.decoder.feed(data)
        return self.frames.pop(0)

    def send(self, message: p.Message, request_id: int) -> None:
        self.sock.sendall(p.encode(message, request_id))

    def until_pong(self, ping_id: int = 0xFFFF) -> list:
        """Every frame before the PONG to a PING sent now: the frames the daemon had produced."""
        self.send(p.Ping(), ping_id)
        seen = []
        while True:
            frame = self.next()
            if frame.type == p.MessageType.PONG and frame.request_id == ping_id:
                return seen
            seen.append(frame)

    def close(self) -> None:
        self.sock.close()


class ClientTests(DaemonTestCase):
    def setUp(self) -> None:
        self.client = viewerd.Client(self.daemon.socket, client_name="python-tests")
        self.addCleanup(self.client.close)

    def test_welcome_announces_the_capabilities(self) -> None:
        welcome = self.client.connect()
        self.assertEqual(welcome.version, 1)
        self.assertEqual(welcome.capabilities & 0x1F, 0x1F)
        self.assertGreater(welcome.max_outstanding, 0)

    def test_render_cold_then_from_cache(self) -> None:
        source = self.image("cold.jpg", 800, 600)
        first = self.client.render(source, 256, 256)
        self.assertEqual((first.format, first.width, first.height, first.from_cache), (p.Format.JPEG, 256, 192, False))
        self.assertEqual(first.data[:2], b"\xff\xd8")
        second = self.client.render(source, 256, 256)
        self.assertTrue(second.from_cache)
        self.assertEqual(second.data, first.data)

    def test_a_render_asking_for_source_info_answers_it_in_one_round_trip(self) -> None:
        """PROTOCOL.md, RENDER's source_info and RESULT's source: the original's media info with
        the rendition, cold and from the cache, and no INFO read by a worker; the render of the
        whole picture made its placeholder (INFO_REPLY's tag 12), which every answer then carries."""
        source = self.image("source.jpg", 800, 600)
        cold = self.client.render(source, 128, 128, source_info=True)
        self.assertIsNotNone(cold.source.placeholder)
        expected = p.InfoReply(p.MediaKind.PHOTO, 800, 600, 0, 1, 1, "jpeg", False, placeholder=cold.source.placeholder)
        self.assertEqual((cold.width, cold.height, cold.from_cache, cold.source), (128, 96, False, expected))
        hit = self.client.render(source, 128, 128, source_info=True)
        self.assertEqual((hit.from_cache, hit.source), (True, expected))
        self.assertIsNone(self.client.render(source, 128, 128).source)
        self.assertEqual(self.client.info(source), expected)
        self.assertEqual(self.client.stats()["info_reads"], 0)

    def test_errors_carry_the_stable_code(self) -> None:
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.render(os.path.join(self.images, "missing.jpg"), 64)
        self.assertEqual((caught.exception.code, caught.exception.name), (200, "not-found"))
        self.assertFalse(caught.exception.retryable)
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.render(self.image("nc.jpg", 300, 200), 64, delivery="cache-only")
        self.assertEqual(caught.exception.code, 401)
        self.assertTrue(caught.exception.retryable)

    def test_corrupt_and_unsupported_files(self) -> None:
        """What PROTOCOL.md says of 300 and 301: an empty file and text are not images, a JPEG
        whose data is garbage after a valid header is corrupt, a JPEG cut short still renders."""
        with open(self.image("whole.jpg", 640, 480), "rb") as f:
            whole = f.read()
        header = whole[:whole.index(b"\xff\xda")]  # everything before the first scan
        cases = {"empty.jpg": b"", "text.jpg": b"hello, not an image\n" * 10,
                 "garbage.jpg": header + bytes(range(1, 256)) * 16, "header-only.jpg": header}
        expected = {"empty.jpg": 300, "text.jpg": 300, "garbage.jpg": 301, "header-only.jpg": 301}
        for name, data in cases.items():
            path = os.path.join(self.images, name)
            with open(path, "wb") as f:
                f.write(data)
            with self.subTest(file=name):
                with self.assertRaises(viewerd.ViewerError) as caught:
                    self.client.render(path, 64)
                self.assertEqual(caught.exception.code, expected[name], caught.exception.message)
        cut = os.path.join(self.images, "cut.jpg")
        with open(cut, "wb") as f:
            f.write(whole[:len(whole) // 2])
        self.assertEqual(self.client.render(cut, 64).width, 64)

    def test_a_source_cut_short_says_so_and_is_not_stored(self) -> None:
        """PROTOCOL.md, RESULT's source_partial: a JPEG still being copied renders flagged, is
        not stored, and once whole renders unflagged."""
        with open(self.image("copy-whole.jpg", 640, 480), "rb") as f:
            whole = f.read()
        path = os.path.join(self.images, "copying.jpg")
        with open(path, "wb") as f:
            f.write(whole[:len(whole) // 2])
        cut = self.client.render(path, 64)
        self.assertEqual((cut.source_partial, cut.from_cache), (True, False))
        self.assertIn("source_partial=True", repr(cut))
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.render(path, 64, delivery="cache-only")
        self.assertEqual(caught.exception.name, "not-cached")
        with open(path, "wb") as f:
            f.write(whole)
        self.assertFalse(self.client.render(path, 64).source_partial)
        self.assertTrue(self.client.render(path, 64).from_cache)

    def test_opportunistic_delivery_sends_a_preview_before_the_result(self) -> None:
        """PROTOCOL.md, PREVIEW: with a smaller rendition of the file stored (the grid's), a larger
        box (the pager's) gets it as its PREVIEW, at its own size and with its bytes, before the
        RESULT: the client takes the preview's size from the PREVIEW."""
        source = self.image("big.jpg", 2400, 1800)
        grid = self.client.render(source, 100)
        events = list(self.client.start_render(source, 300, 300, delivery="opportunistic").events())
        self.assertIsInstance(events[-1], p.Result)
        previews = events[:-1]
        self.assertEqual(len(previews), 1)
        self.assertEqual((previews[0].width, previews[0].height, previews[0].data), (100, 75, grid.data))
        self.assertEqual((events[-1].width, events[-1].height), (300, 225))
        # final: none
        events = list(self.client.start_render(source, 310, 310, delivery="final").events())
        self.assertEqual([type(e) for e in events], [p.Result])

    def test_no_preview_that_would_cost_a_large_part_of_the_final(self) -> None:
        """A stored rendition in another format is re-encoded, at its own size, only when its
        pixels and the preview's (the same) are at most a 16th of the source's: a 64-wide WebP
        of 2400x1800 into 300 or 1200 has one (never scaled up: 64 wide), a 128-wide WebP of
        640x480 into 256 none; nor has a plain JPEG without anything stored (a decode of the
        source itself is never cheap). (One in the requested format costs nothing: it is sent.)"""
        for name, width, height, stored, box, expected in (("a", 2400, 1800, 64, 300, 1), ("b", 640, 480, 128, 256, 0),
                                                           ("c", 2400, 1800, 64, 1200, 1)):
            source = self.image(f"cost-{name}.jpg", width, height)
            self.client.render(source, stored, format="webp")
            seen: list = []
            self.client.render(source, box, 0, delivery="opportunistic", on_preview=seen.append)
            self.assertEqual([preview.width for preview in seen], [stored] * expected, f"{width}x{height} into {box}")
        seen = []
        self.client.render(self.image("cost-plain.jpg", 2400, 1800), 300, delivery="opportunistic", on_preview=seen.append)
        self.assertEqual(seen, [])

    def test_a_derived_rendition_comes_without_a_preview(self) -> None:
        """PROTOCOL.md, Derivation: with an 800-wide rendition of a 4000x3000 JPEG stored, width
        400 is made from it: from_cache false, no PREVIEW although the source is 10 times larger."""
        source = self.image("derive.jpg", 4000, 3000)
        self.client.render(source, 800)
        before = self.client.stats()["derivations"]
        previews: list = []
        result = self.client.render(source, 400, delivery="opportunistic", on_preview=previews.append)
        self.assertEqual((result.width, result.height, result.from_cache, previews), (400, 300, False, []))
        self.assertEqual(self.client.stats()["derivations"], before + 1)

    def test_fit_rounds_the_free_side_to_nearest_and_fill_never_enlarges(self) -> None:
        """PROTOCOL.md, RENDER: the free side rounds to nearest (halves up) for a source decoded
        whole (PNG); a JPEG shrunk on load may land one pixel off either way."""
        jpeg = self.image("odd.jpg", 1000, 667)
        png = os.path.join(self.images, "odd.png")
        subprocess.run(["vips", "copy", jpeg, png], check=True)
        for width, height in ((100, 67), (150, 100), (500, 334), (999, 666)):  # 66.7, 100.05, 333.5, 666.33
            self.assertEqual(self.client.render(png, width).height, height)
            self.assertLessEqual(abs(self.client.render(jpeg, width).height - height), 1)
        self.assertEqual(self.client.render(png, 0, 45).width, 67)  # 67.47
        wide = self.image("fill.jpg", 1280, 1024)
        filled = self.client.render(wide, 1500, 500, fit="fill")
        self.assertEqual((filled.width, filled.height), (1280, 500))
        up = self.client.render(wide, 1500, 500, fit="fill", upscale=True)
        self.assertEqual((up.width, up.height), (1500, 500))

    def test_transforms_turn_mirror_recolour_stretch_and_save_gif(self) -> None:
        """PROTOCOL.md, "Turning, mirroring and colour": a quarter turn swaps the sides, each
        transform is its own rendition, and stretch is exactly the box."""
        self.assertTrue(self.client.connect().capabilities & p.Capability.TRANSFORMS)
        source = self.image("turn.jpg", 400, 300)
        plain = self.client.render(source, 200, 200)
        turned = self.client.render(source, 200, 200, rotation=90, mirror=True, colour="gray")
        self.assertEqual((plain.width, plain.height), (200, 150))
        self.assertEqual((turned.width, turned.height, turned.from_cache), (150, 200, False))
        self.assertNotEqual(turned.data, plain.data)
        self.assertTrue(self.client.render(source, 200, 200, rotation=90, mirror=True, colour="gray").from_cache)
        stretched = self.client.render(source, 333, 20, fit="stretch", format="gif")
        self.assertEqual((stretched.format, stretched.width, stretched.height), (p.Format.GIF, 333, 20))
        self.assertEqual(stretched.data[:4], b"GIF8")
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.render(source, 200, 200, rotation=360)
        self.assertEqual(caught.exception.name, "invalid-argument")

    def test_pipelining_100_requests_each_answered_exactly_once(self) -> None:
        sources = [self.image(f"pipe-{i % 5}.jpg", 400, 300) for i in range(5)]
        raw = RawConnection(self.daemon.socket)
        self.addCleanup(raw.close)
        for rid in range(1, 101):
            spec = p.Spec(width=40 + rid)
            raw.send(p.Render(sources[rid % 5], spec), rid)
        answers: dict = {}
        while len(answers) < 100:
            frame = raw.next()
            self.assertNotEqual(frame.type, p.MessageType.PREVIEW)
            answers[frame.request_id] = answers.get(frame.request_id, 0) + 1
            self.assertEqual(frame.type, p.MessageType.RESULT, p.decode(frame))
        self.assertEqual(answers, {rid: 1 for rid in range(1, 101)})
        self.assertEqual(raw.until_pong(), [])  # nothing more for any of them

    def test_pipelining_through_the_client(self) -> None:
        source = self.image("pipe-client.jpg", 500, 400)
        requests = [self.client.start_render(source, 20 + i) for i in range(100)]
        results = [r.result() for r in reversed(requests)]
        self.assertEqual(sorted(r.width for r in results), list(range(20, 120)))

    def test_one_client_shared_by_threads(self) -> None:
        """Client is safe to share: 8 threads, 10 renders each, every answer to its own caller."""
        import threading
        source = self.image("threads.jpg", 600, 450)
        widths: dict = {}
        failures: list = []

        def work(n: int) -> None:
            try:
                widths[n] = [self.client.render(source, 10 + n * 10 + i).width for i in range(10)]
            except Exception as error:  # reported below, in the test's thread
                failures.append(error)

        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        self.assertEqual(failures, [])
        self.assertEqual(widths, {n: [10 + n * 10 + i for i in range(10)] for n in range(8)})

    def test_cancel_ends_the_render_with_one_terminal_answer(self) -> None:
        source = self.image("cancel.jpg", 4000, 3000)
        request = self.client.start_render(source, 500, 500)
        request.cancel()
        try:
            request.result()
            cancelled = False
        except viewerd.Cancelled:
            cancelled = True
        self.assertTrue(cancelled, "a 12-megapixel render cancelled at once still ran to its RESULT")
        self.client.ping()

    def test_an_error_about_a_bad_cancel_is_the_renders_terminal_answer(self) -> None:
        """PROTOCOL.md, Request ids: a malformed CANCEL for a pending RENDER gets ERROR 100 with
        the RENDER's id, and nothing else comes for that id."""
        source = self.image("badcancel.jpg", 4000, 3000)
        raw = RawConnection(self.daemon.socket)
        self.addCleanup(raw.close)
        raw.send(p.Render(source, p.Spec(width=333)), 5)
        raw.sock.sendall(p.Frame(p.MessageType.CANCEL, 5, b"\x01\x00\x02").encode())  # field header cut
        frame = raw.next()
        self.assertEqual((frame.type, frame.request_id), (p.MessageType.ERROR, 5))
        self.assertEqual(p.decode(frame).code, 100)
        time.sleep(1.5)
        self.assertEqual(raw.until_pong(), [])

    def test_what_malformed_frames_counts(self) -> None:
        """PROTOCOL.md, STATS: a malformed CANCEL counts in malformed_frames; a malformed PING is
        answered with its own id and counts only in errors_malformed_frame."""
        before = self.client.stats()
        raw = RawConnection(self.daemon.socket)
        self.addCleanup(raw.close)
        raw.sock.sendall(p.Frame(p.MessageType.PING, 40, b"\x01").encode())
        raw.sock.sendall(p.Frame(p.MessageType.CANCEL, 41, b"\x01").encode())
        frames = raw.until_pong()
        self.assertEqual(sorted((f.request_id, p.decode(f).code) for f in frames), [(40, 100), (41, 100)])
        self.assertIn("cut short", p.decode(frames[0]).message)
        after = self.client.stats()
        self.assertEqual(after["malformed_frames"], before["malformed_frames"] + 1)
        self.assertEqual(after["errors_malformed_frame"], before.get("errors_malformed_frame", 0) + 2)

    def test_cancel_or_set_priority_naming_nothing_is_ignored(self) -> None:
        raw = RawConnection(self.daemon.socket)
        self.addCleanup(raw.close)
        raw.send(p.Cancel(), 77)
        raw.send(p.SetPriority(p.Priority.VISIBLE), 78)
        self.assertEqual(raw.until_pong(), [])

    def test_set_priority_keeps_the_render_and_its_answer(self) -> None:
        source = self.image("prio.jpg", 2000, 1500)
        request = self.client.start_render(source, 222, priority="background")
        request.set_priority("visible")
        self.assertEqual(request.result().width, 222)

    def test_prefetch_then_poll_with_cache_only(self) -> None:
        sources = [self.image(f"pre-{i}.jpg", 600, 400) for i in range(3)]
        self.assertEqual(self.client.prefetch(sources, 128, 128), 3)
        self.assertEqual(self.client.prefetch(sources, 128, 128), 0)  # already prefetching or cached
        deadline = time.monotonic() + 20
        for source in sources:
            while True:
                try:
                    self.assertTrue(self.client.render(source, 128, 128, delivery="cache-only").from_cache)
                    break
                except viewerd.ViewerError as error:
                    self.assertEqual(error.code, 401)
                    self.assertLess(time.monotonic(), deadline)
                    time.sleep(0.05)
        self.assertEqual(self.client.stop_prefetch(sources, 128, 128), 0)  # done: nothing to withdraw
        self.assertEqual(self.client.stop_prefetch_all(), 0)

    def test_render_by_descriptor(self) -> None:
        source = self.image("fd.jpg", 640, 480)
        fd = os.open(source, os.O_RDONLY)
        try:
            result = self.client.render(None, 160, fd=fd)
        finally:
            os.close(fd)
        self.assertEqual((result.width, result.height), (160, 120))
        # The same file by path shares the cache entry.
        self.assertTrue(self.client.render(source, 160).from_cache)

    def test_info_by_path_and_descriptor(self) -> None:
        """PROTOCOL.md, INFO: a JPEG's kind, size and format from its header; asked again, from
        the cache; a descriptor names the same file; text is unsupported-format."""
        source = self.image("info.jpg", 320, 200)
        info = self.client.info(source)
        self.assertEqual(info, p.InfoReply(p.MediaKind.PHOTO, 320, 200, 0, 1, 1, "jpeg", False))
        hits = self.client.stats()["info_hits"]
        fd = os.open(source, os.O_RDONLY)
        try:
            self.assertEqual(self.client.info("named", fd=fd), info)
        finally:
            os.close(fd)
        self.assertEqual(self.client.stats()["info_hits"], hits + 1)
        text = os.path.join(self.images, "info.txt")
        with open(text, "w") as f:
            f.write("not an image\n")
        with self.assertRaises(viewerd.ViewerError) as caught:
            self.client.info(text)
        self.assertEqual(caught.exception.name, "unsupported-format")

    def test_invalidate_and_trim(self) -> None:
        source = self.image("inv.jpg", 300, 300)
        self.client.render(source, 50)
        self.assertGreaterEqual(self.client.invalidate(source), 1)
        self.assertFalse(self.client.render(source, 50).from_cache)
        self.client.trim(1 << 40)

    def test_stats_lists_only_documented_counters(self) -> None:
        self.client.ping()
        counters = self.client.stats()
        for name in ("requests", "hits", "misses", "uptime_seconds", "malformed_frames"):
            self.assertIn(name, counters)
        with open(os.path.join(support.REPO, "protocol", "PROTOCOL.md"), encoding="utf-8") as f:
            text = f.read()
        for name in counters:
            if name.startswith("errors_") and name != "errors_":
                continue  # errors_<code name>, documented as a pattern
            self.assertTrue(f"| `{name}` |" in text, f"counter {name} is not documented in PROTOCOL.md")
        # ... in the table's order, which PROTOCOL.md states (for display; clients must not rely on it).
        table = text[text.index("| `uptime_seconds` |"):text.index("| `errors_<name>` |")]
        documented = [line.split("`")[1] for line in table.splitlines() if line.startswith("| `")]
        self.assertEqual([n for n in counters if not n.startswith("errors_")], documented)

    def test_untrusted_directory_is_refused_before_connecting(self) -> None:
        root = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, root)
        os.chmod(root, 0o777)
        path = os.path.join(root, "viewerd.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen()
        self.addCleanup(os.unlink, path)
        self.addCleanup(listener.close)
        with self.assertRaises(viewerd.UntrustedSocket):
            viewerd.Client(path).connect()
        listener.setblocking(False)
        with self.assertRaises(BlockingIOError):
            listener.accept()  # never even connected


class RestartTests(unittest.TestCase):
    def test_daemon_restart_fails_outstanding_requests_and_reconnects(self) -> None:
        daemon = support.Daemon().start()
        self.addCleanup(daemon.cleanup)
        images = os.path.join(daemon.root, "images")
        os.makedirs(images)
        source = support.make_jpeg(os.path.join(images, "a.jpg"), 400, 300)
        client = viewerd.Client(daemon.socket)
        self.addCleanup(client.close)
        self.assertEqual(client.render(source, 100).width, 100)
        daemon.stop()
        with self.assertRaises(viewerd.ConnectionLost) as caught:
            client.render(source, 100)
        self.assertTrue(caught.exception.retryable)
        daemon.start()
        result = client.render(source, 100)  # a new connection, made by the client
        self.assertTrue(result.from_cache)


class HandshakeTests(unittest.TestCase):
    def test_a_refused_handshake_raises_the_daemons_error(self) -> None:
        """A server that answers HELLO with ERROR 101 (no common version): connect raises it."""
        import threading
        root = tempfile.mkdtemp()
        path = os.path.join(root, "fake.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen()
        self.addCleanup(os.rmdir, root)
        self.addCleanup(os.unlink, path)
        self.addCleanup(listener.close)
        received = []

        def serve() -> None:
            conn, _ = listener.accept()
            with conn:
                decoder = p.FrameDecoder()
                while not received:
                    received.extend(decoder.feed(conn.recv(4096)))
                conn.sendall(p.encode(p.Error(101, "speaks 1...1"), 0))

        thread = threading.Thread(target=serve)
        thread.start()
        with self.assertRaises(viewerd.ViewerError) as caught:
            viewerd.Client(path, client_name="x" * 100).connect()
        thread.join()
        self.assertEqual((caught.exception.code, caught.exception.name), (101, "unsupported-version"))
        self.assertEqual((received[0].type, received[0].request_id), (p.MessageType.HELLO, 0))
        self.assertEqual(p.decode(received[0]), p.Hello(1, 1, "x" * 100))


class SocketPathTests(unittest.TestCase):
    def test_default_socket(self) -> None:
        from viewerd.socketpath import user_socket, trusted_uids
        self.assertEqual(user_socket({"VIEWERD_SOCKET": "/x/s"}), "/x/s")
        self.assertEqual(user_socket({"XDG_RUNTIME_DIR": "/run/user/5"}), "/run/user/5/viewerd/viewerd.sock")
        self.assertEqual(user_socket({"XDG_RUNTIME_DIR": "rel"}, uid=7), "/tmp/viewerd-7/viewerd.sock")
        self.assertEqual(user_socket({"VIEWERD_SOCKET": "", "XDG_RUNTIME_DIR": ""}, uid=7), "/tmp/viewerd-7/viewerd.sock")
        self.assertIn(4242, trusted_uids({"VIEWERD_SERVICE_USER": "4242"}))

    def test_system_socket_is_the_fallback_when_no_per_user_socket_exists(self) -> None:
        from viewerd import socketpath
        root = tempfile.mkdtemp()
        self.addCleanup(os.rmdir, root)
        system = os.path.join(root, "system.sock")
        open(system, "w").close()
        self.addCleanup(os.unlink, system)
        saved = socketpath.SYSTEM_SOCKET
        socketpath.SYSTEM_SOCKET = system
        self.addCleanup(setattr, socketpath, "SYSTEM_SOCKET", saved)
        env = {"XDG_RUNTIME_DIR": root}
        self.assertEqual(socketpath.default_socket(env), system)
        self.assertEqual(socketpath.default_socket({**env, "VIEWERD_SOCKET": ""}), f"{root}/viewerd/viewerd.sock")
        os.makedirs(f"{root}/viewerd")
        self.addCleanup(os.rmdir, f"{root}/viewerd")
        open(f"{root}/viewerd/viewerd.sock", "w").close()
        self.addCleanup(os.unlink, f"{root}/viewerd/viewerd.sock")
        self.assertEqual(socketpath.default_socket(env), f"{root}/viewerd/viewerd.sock")


if __name__ == "__main__":
    unittest.main()
