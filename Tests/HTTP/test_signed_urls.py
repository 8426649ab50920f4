"""Signed URLs end to end: keys read from --sign-key-file (a key on the command line shows in
ps), an unsigned or wrongly signed URL refused 403, a URL signed with either key of a rotation
served, and info.json's id carrying the signature so a deep-zoom viewer's tiles are signed too."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import tempfile
import unittest

from PIL import Image

import http_support

OLD_KEY = bytes(range(16))
NEW_KEY = bytes(range(100, 132))


def signature(key: bytes, identifier: str) -> str:
    digest = hmac.new(key, identifier.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


class SignedURLTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        cls.directory = tempfile.mkdtemp(prefix="viewerd-iiif-signed-")
        images = os.path.join(cls.directory, "images")
        os.mkdir(images)
        Image.new("RGB", (300, 200), (10, 120, 200)).save(os.path.join(images, "a.png"))
        keys = os.path.join(cls.directory, "keys")
        with open(keys, "w") as f:
            f.write(f"# the key being retired\n{OLD_KEY.hex()}\n\n{NEW_KEY.hex()}\n")
        os.chmod(keys, 0o600)
        cls.origin = http_support.Origin(os.path.join(cls.directory, "origin"), {"s": images},
                                         ["--sign-key-file", keys])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.origin.stop()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def get(self, target: str) -> tuple:
        status, headers, body = http_support.get(self.origin.front.port, target)
        return status, headers, body

    def test_refused_unsigned_or_wrong(self) -> None:
        self.assertEqual(self.get("/iiif/3/s%2Fa.png/full/max/0/default.png")[0], 403)
        wrong = signature(b"another key, not configured", "s/a.png")
        self.assertEqual(self.get(f"/iiif/3/{wrong}/s%2Fa.png/full/max/0/default.png")[0], 403)
        # Another image's signature does not open this one.
        other = signature(NEW_KEY, "s/b.png")
        self.assertEqual(self.get(f"/iiif/3/{other}/s%2Fa.png/full/max/0/default.png")[0], 403)

    def test_either_key_of_a_rotation_serves_and_info_json_carries_it(self) -> None:
        for key in (OLD_KEY, NEW_KEY):
            sig = signature(key, "s/a.png")
            status, _, body = self.get(f"/iiif/3/{sig}/s%2Fa.png/full/max/0/default.png")
            self.assertEqual(status, 200, f"{body[:200]!r}\n{self.origin.logs()}")
        sig = signature(NEW_KEY, "s/a.png")
        status, _, body = self.get(f"/iiif/3/{sig}/s%2Fa.png/info.json")
        self.assertEqual(status, 200)
        self.assertTrue(json.loads(body)["id"].endswith(f"/iiif/3/{sig}/s%2Fa.png"), body)


if __name__ == "__main__":
    unittest.main()
