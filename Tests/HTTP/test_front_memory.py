"""What viewerd-http remembers (--memory-cache): a warm tile is answered without asking the
daemon, the same bytes under the same ETag; a changed source is never answered from memory;
a 304 is never the answer to a request that would be an error."""
from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import unittest

from PIL import Image

import http_support
import viewerd


class FrontMemoryTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        cls.directory = tempfile.mkdtemp(prefix="viewerd-front-memory-")
        cls.images = os.path.join(cls.directory, "images")
        os.mkdir(cls.images)
        Image.new("RGB", (600, 400), (200, 40, 40)).save(os.path.join(cls.images, "a.png"))
        cls.origin = http_support.Origin(os.path.join(cls.directory, "origin"), {"m": cls.images})

    @classmethod
    def tearDownClass(cls) -> None:
        cls.origin.stop()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def daemon_requests(self) -> int:
        client = viewerd.Client(self.origin.daemon.socket, client_name="front-memory-test")
        try:
            return client.stats()["requests"]
        finally:
            client.close()

    def get(self, target: str, headers=None):
        return http_support.get(self.origin.front.port, target, headers)

    def test_a_warm_tile_asks_the_daemon_nothing(self) -> None:
        target = "/iiif/3/m%2Fa.png/0,0,256,256/256,/0/default.jpg"
        status, headers, first = self.get(target)
        self.assertEqual(status, 200, f"{first[:200]!r}\n{self.origin.logs()}")
        before = self.daemon_requests()
        for _ in range(5):
            status, again_headers, again = self.get(target)
            self.assertEqual(status, 200)
            self.assertEqual(again, first)
            self.assertEqual(again_headers["ETag"], headers["ETag"])
        # (STATS is not counted among the requests.)
        self.assertEqual(self.daemon_requests(), before, "the warm tile reached the daemon")
        status, _, metrics = self.get("/metrics")
        self.assertIn(b"viewerd_http_remembered_total 5", metrics)

    def test_info_json_of_a_known_source_asks_no_info(self) -> None:
        status, _, _ = self.get("/iiif/3/m%2Fa.png/full/100,/0/default.jpg")
        self.assertEqual(status, 200)
        before = self.daemon_requests()
        status, _, body = self.get("/iiif/3/m%2Fa.png/info.json")
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(json.loads(body)["width"], 600)
        self.assertEqual(self.daemon_requests(), before, "info.json of a source whose INFO the front has reached the daemon")

    def test_a_changed_source_is_not_answered_from_memory(self) -> None:
        path = os.path.join(self.images, "changing.png")
        Image.new("RGB", (300, 200), (0, 0, 255)).save(path)
        target = "/iiif/3/m%2Fchanging.png/full/30,/0/default.png"
        status, headers, before = self.get(target)
        self.assertEqual(status, 200)
        Image.new("RGB", (300, 200), (0, 255, 0)).save(path)
        stat = os.stat(path)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000_000))
        status, after_headers, after = self.get(target)
        self.assertEqual(status, 200)
        self.assertNotEqual(after_headers["ETag"], headers["ETag"])
        self.assertNotEqual(after, before)
        pixel = Image.open(io.BytesIO(after)).convert("RGB").getpixel((15, 10))
        self.assertGreater(pixel[1], 200, f"the old image was served: {pixel}")

    def test_no_304_for_what_would_be_an_error(self) -> None:
        # A region outside the image is a 400; no condition makes it a 304 (RFC 9110 §13.2.1).
        target = "/iiif/3/m%2Fa.png/5000,5000,10,10/max/0/default.jpg"
        for headers in ({}, {"If-None-Match": "*"}, {"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"}):
            status, _, body = self.get(target, headers)
            self.assertEqual(status, 400, f"{headers}: {status} {body[:200]!r}")
        # A good request is still 304 by date, by * or by its ETag, asked of the daemon or
        # answered from the front's memory alike.
        good = "/iiif/3/m%2Fa.png/full/50,/0/default.jpg"
        status, headers, _ = self.get(good)
        self.assertEqual(status, 200)
        for _ in range(2):
            self.assertEqual(self.get(good, {"If-Modified-Since": headers["Last-Modified"]})[0], 304)
            self.assertEqual(self.get(good, {"If-None-Match": "*"})[0], 304)
            self.assertEqual(self.get(good, {"If-None-Match": headers["ETag"]})[0], 304)
            self.assertEqual(self.get(good, {"If-None-Match": '"other"'})[0], 200)


if __name__ == "__main__":
    unittest.main()
