"""The Python ThumbHash decoder against protocol/vectors/thumbhash/vectors.json, the reference's
own answers; Tests/ThumbHashTests holds the Swift decoder to the same file, so the two paint the
same bytes."""
from __future__ import annotations

import json
import os
import unittest

import support  # noqa: F401  (puts the package on sys.path)
from support import REPO
from viewerd import protocol as p
from viewerd import thumbhash

with open(os.path.join(REPO, "protocol", "vectors", "thumbhash", "vectors.json")) as f:
    VECTORS = json.load(f)


class ThumbHashTests(unittest.TestCase):
    def test_decodes_each_hash_to_the_reference_pixels(self) -> None:
        for case in VECTORS["cases"]:
            with self.subTest(case=case["name"]):
                width, height, rgba = thumbhash.decode(bytes.fromhex(case["hash"]))
                self.assertEqual((width, height), (case["decoded"]["width"], case["decoded"]["height"]))
                self.assertEqual(rgba.hex(), case["decoded"]["rgba"])

    def test_average_and_aspect_are_the_reference_ones(self) -> None:
        for case in VECTORS["cases"]:
            with self.subTest(case=case["name"]):
                hash = bytes.fromhex(case["hash"])
                for mine, theirs in zip(thumbhash.average_color(hash), case["average"]):
                    self.assertAlmostEqual(mine, theirs, places=12)
                self.assertEqual(thumbhash.aspect_ratio(hash), case["aspect_ratio"])

    def test_refuses_bytes_that_are_not_a_hash(self) -> None:
        for case in VECTORS["invalid"]:
            with self.subTest(case=case["name"]):
                hash = bytes.fromhex(case["hash"])
                self.assertIsNone(thumbhash.decode(hash))
                self.assertIsNone(thumbhash.average_color(hash))
                self.assertIsNone(thumbhash.aspect_ratio(hash))

    def test_info_reply_paints_its_placeholder(self) -> None:
        case = VECTORS["cases"][0]
        info = p.InfoReply(p.MediaKind.PHOTO, 4000, 3000, format="jpeg", placeholder=bytes.fromhex(case["hash"]))
        self.assertEqual(info.placeholder_image()[2].hex(), case["decoded"]["rgba"])
        self.assertIsNone(p.InfoReply(p.MediaKind.PHOTO, 1, 1).placeholder_image())

    def test_an_oversized_placeholder_is_malformed(self) -> None:
        frame = p.encode(p.InfoReply(p.MediaKind.PHOTO, 1, 1, placeholder=bytes(65)), 1)
        with self.assertRaises(p.MalformedFrame):
            p.decode(p.FrameDecoder().feed(frame)[0])


if __name__ == "__main__":
    unittest.main()
