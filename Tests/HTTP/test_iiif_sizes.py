"""The sizes viewerd-http answers are the sizes IIIF asks, to the pixel, on images that are not
square (the validator's test image is, so it cannot see a side that rounds the other way):
a whole image fitted by the side the request gives, a region cut to its exact box."""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import unittest

from PIL import Image

import http_support


class IIIFSizeTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        cls.directory = tempfile.mkdtemp(prefix="viewerd-iiif-sizes-")
        images = os.path.join(cls.directory, "images")
        os.mkdir(images)
        # 1000×333 and 333×1000: a derived side of 33.3 rounds down, so fitting into both
        # sides would let the other bind and lose a pixel.
        Image.new("RGB", (1000, 333), (200, 40, 40)).save(os.path.join(images, "wide.png"))
        Image.new("RGB", (333, 1000), (40, 200, 40)).save(os.path.join(images, "tall.png"))
        cls.origin = http_support.Origin(os.path.join(cls.directory, "origin"), {"s": images})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.origin.stop()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def size(self, identifier: str, region: str, size: str, rotation: str = "0") -> tuple:
        target = f"/iiif/3/s%2F{identifier}/{region}/{size}/{rotation}/default.png"
        status, _, body = http_support.get(self.origin.front.port, target)
        self.assertEqual(status, 200, f"{target}: {body[:200]!r}\n{self.origin.logs()}")
        return Image.open(io.BytesIO(body)).size

    def test_whole_image_sizes(self) -> None:
        self.assertEqual(self.size("wide.png", "full", "100,"), (100, 33))
        self.assertEqual(self.size("tall.png", "full", ",100"), (33, 100))
        self.assertEqual(self.size("wide.png", "full", ",100"), (300, 100))
        self.assertEqual(self.size("wide.png", "full", "pct:10"), (100, 33))
        self.assertEqual(self.size("wide.png", "full", "!100,100"), (100, 33))
        self.assertEqual(self.size("tall.png", "full", "!100,100"), (33, 100))
        self.assertEqual(self.size("wide.png", "full", "100,100"), (100, 100))
        self.assertEqual(self.size("wide.png", "full", "100,", "90"), (33, 100))

    def test_region_sizes(self) -> None:
        self.assertEqual(self.size("wide.png", "333,0,500,333", "100,"), (100, 67))
        self.assertEqual(self.size("wide.png", "1,1,999,332", ",100"), (301, 100))
        self.assertEqual(self.size("tall.png", "0,0,111,333", "37,"), (37, 111))


if __name__ == "__main__":
    unittest.main()
