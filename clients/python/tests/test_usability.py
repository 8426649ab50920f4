"""What a newcomer meets first (review of 8439786, points 23 to 28): printing answers."""
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
