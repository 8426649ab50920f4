"""Raw renditions in shared memory (PROTOCOL.md, "Shared-memory renditions") against a real
viewerd: a RENDER of raw with ``shared_memory`` gets a sealed memfd, mapped read-only here."""
from __future__ import annotations

import fcntl
import gc
import mmap
import os
import socket

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
        self.assertLessEqual(daemon_descriptors(self.daemon.process.pid), theirs, "the daemon closes its copies")
