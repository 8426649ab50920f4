"""Raw renditions in shared memory (PROTOCOL.md, "Shared-memory renditions") against a real
viewerd: a RENDER of raw with ``shared_memory`` gets a sealed memfd, mapped read-only here."""
from __future__ import annotations

import fcntl
import gc
import mmap
import os
import socket
import tempfile
import threading
import time
import unittest

from support import DaemonTestCase
import viewerd
from viewerd import protocol as p
from viewerd.socketpath import connect_trusted

_SEALS = 0x1 | 0x2 | 0x4 | 0x8  # F_SEAL_SEAL | SHRINK | GROW | WRITE


def own_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


def rendition_mappings() -> int:
    with open("/proc/self/maps") as maps:
        return sum("memfd:viewerd-rendition" in line for line in maps)


def daemon_descriptors(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def eventually(condition, seconds: float = 10) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def sealed_memfd(data: bytes) -> int:
    fd = os.memfd_create("fake-rendition", os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    os.write(fd, data)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    return fd


class LyingServerTests(unittest.TestCase):
    """The client's checks of what a server sends with a descriptor (PROTOCOL.md: a client MUST
    check ``shared_bytes``), against a server of this test's own that lies."""

    def serve(self, answer) -> str:
        directory = tempfile.mkdtemp()
        path = os.path.join(directory, "fake.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        listener.listen(1)
        self.addCleanup(listener.close)

        def run() -> None:
            conn, _ = listener.accept()
            with conn:
                decoder = p.FrameDecoder()
                frames = []
                while True:
                    data = conn.recv(1 << 16)
                    if not data:
                        return
                    for frame in decoder.feed(data):
                        if frame.type == p.MessageType.HELLO:
                            conn.sendall(p.encode(p.Welcome(1, 1 << 20, 1 << 20, "fake", p.Capability.SHARED_MEMORY), 0))
                        else:
                            answer(conn, frame.request_id)

        threading.Thread(target=run, daemon=True).start()
        return path

    def client_answered(self, frame, memfd_size: int) -> viewerd.Client:
        """A client of a server that answers each request with ``frame(request id)`` and a sealed
        memfd of ``memfd_size`` bytes, connected."""
        def answer(conn: socket.socket, rid: int) -> None:
            fd = sealed_memfd(bytes(memfd_size))
            try:
                socket.send_fds(conn, [frame(rid)], [fd])
            finally:
                os.close(fd)

        client = viewerd.Client(self.serve(answer), client_name="lied-to")
        self.addCleanup(client.close)
        client.connect()
        return client

    def test_a_shared_bytes_other_than_width_height_4_fails_its_request(self) -> None:
        client = self.client_answered(lambda rid: p.encode(p.Result(p.Format.RAW, 1, 1, b"", shared_bytes=64), rid, flags=1), 64)
        before = own_descriptors()
        with self.assertRaises(viewerd.ViewerError) as raised:
            client.render("/x.jpg", 1, 1, format="raw", shared_memory=True)
        self.assertIn("64 bytes", str(raised.exception))
        self.assertLessEqual(own_descriptors(), before, "its descriptor closed")

    def test_a_descriptor_with_a_frame_not_flagged_for_one_is_closed(self) -> None:
        client = self.client_answered(lambda rid: p.encode(p.Result(p.Format.RAW, 1, 1, bytes(4)), rid), 4)
        before = own_descriptors()
        for _ in range(5):
            self.assertEqual(client.render("/x.jpg", 1, 1, format="raw", shared_memory=True).data, bytes(4))
        self.assertLessEqual(own_descriptors(), before, "stray descriptors closed")


class SharedMemoryTests(DaemonTestCase):
    def setUp(self) -> None:
        self.client = viewerd.Client(self.daemon.socket, client_name="python-shared")
        self.addCleanup(self.client.close)

    def test_the_capability_is_announced(self) -> None:
        self.assertTrue(self.client.connect().capabilities & p.Capability.SHARED_MEMORY)

    def test_the_result_comes_as_a_sealed_read_only_memfd_with_the_inline_pixels(self) -> None:
        source = self.image("sealed.jpg", 800, 600)
        inline = self.client.render(source, 400, 300, format="raw")
        self.assertIsInstance(inline.data, bytes)
        self.assertIsNone(inline.shared_bytes)

        sock = connect_trusted(self.daemon.socket)
        self.addCleanup(sock.close)
        sock.settimeout(30)
        sock.sendall(p.encode(p.Hello(client_name="raw"), 0))
        decoder = p.FrameDecoder()
        frames, fds = [], []
        sock.sendall(p.encode(p.Render(source, p.Spec(400, 300, format=p.Format.RAW), shared_memory=True), 2))
        while len(frames) < 2:
            data, received, _, _ = socket.recv_fds(sock, 1 << 20, 4)
            self.assertTrue(data)
            fds += received
            frames += decoder.feed(data)
        frame = frames[1]
        self.assertTrue(frame.carries_descriptor)
        self.assertLess(len(frame.body), 100, "the pixels are not in the frame")
        result = p.decode(frame)
        self.assertEqual((result.shared_bytes, result.data, result.from_cache), (400 * 300 * 4, b"", True))
        self.assertEqual(len(fds), 1)
        fd = fds[0]
        self.addCleanup(os.close, fd)
        self.assertEqual(fcntl.fcntl(fd, fcntl.F_GET_SEALS) & _SEALS, _SEALS)
        with self.assertRaises(PermissionError):
            os.write(fd, b"x")
        with self.assertRaises(PermissionError):
            mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        with mmap.mmap(fd, result.shared_bytes, mmap.MAP_SHARED, mmap.PROT_READ) as mapped:
            self.assertEqual(mapped[:], inline.data)

    def test_the_client_maps_it_read_only_and_frees_it(self) -> None:
        source = self.image("freed.jpg", 900, 600)
        inline = self.client.render(source, 300, 200, format="raw")
        shared = self.client.render(source, 300, 200, format="raw", shared_memory=True)
        self.assertIsInstance(shared.data, memoryview)
        self.assertTrue(shared.data.readonly)
        self.assertEqual(shared.data, inline.data)
        with self.assertRaises(TypeError):
            shared.data[0] = 1  # type: ignore[index]
        # Rendered for the request (a miss) too, and not raw: bytes inline
        rendered = self.client.render(source, 150, 100, format="raw", shared_memory=True)
        self.assertFalse(rendered.from_cache)
        self.assertEqual(rendered.data, self.client.render(source, 150, 100, format="raw").data)
        jpeg = self.client.render(source, 300, 200, shared_memory=True)
        self.assertIsInstance(jpeg.data, bytes)
        del shared, rendered
        gc.collect()
        self.assertEqual(rendition_mappings(), 0, "mappings go with their results")

        ours, theirs = own_descriptors(), daemon_descriptors(self.daemon.process.pid)
        for _ in range(30):
            page = self.client.render(source, 300, 200, format="raw", shared_memory=True)
            self.assertEqual(len(page.data), 300 * 200 * 4)
        del page
        gc.collect()
        self.assertLessEqual(own_descriptors(), ours, "descriptors closed once mapped")
        self.assertEqual(rendition_mappings(), 0)
        # (the last request's source is closed off the daemon's loop, a moment after its answer)
        self.assertTrue(eventually(lambda: daemon_descriptors(self.daemon.process.pid) <= theirs),
                        "the daemon closes its copies")
