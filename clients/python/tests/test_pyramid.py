"""The tile pyramid's arithmetic: the worked numbers of Tests/RenderingTests/TilePyramidTests.swift
(which checks the Swift original against ``vips dzsave``), so the two clients ask for the same tiles."""
from __future__ import annotations

import struct
import unittest

import support  # noqa: F401  (puts the package on sys.path)
from viewerd import protocol as p
from viewerd.pyramid import Tile, TilePyramid


class TilePyramidTests(unittest.TestCase):
    def test_a_6000x4000_photo_levels_and_edges(self) -> None:
        pyramid = TilePyramid(6000, 4000)
        self.assertEqual(pyramid.top, 13)
        self.assertEqual(pyramid.size(13), (6000, 4000))
        self.assertEqual(pyramid.size(12), (3000, 2000))
        self.assertEqual(pyramid.size(8), (188, 125))
        self.assertEqual(pyramid.size(0), (1, 1))
        self.assertEqual(pyramid.grid(13), (24, 16))
        self.assertEqual(pyramid.grid(12), (12, 8))
        self.assertEqual(pyramid.tile(13, 23, 15), Tile(13, 23, 15, 5887, 3839, 113, 161))
        self.assertEqual(pyramid.tile(12, 11, 7), Tile(12, 11, 7, 2815, 1791, 185, 209))
        # Overlap only on sides with a neighbour: the first tile is 257 square, an inner one 258.
        self.assertEqual(pyramid.tile(12, 0, 0), Tile(12, 0, 0, 0, 0, 257, 257))
        self.assertEqual(pyramid.tile(12, 1, 1), Tile(12, 1, 1, 255, 255, 258, 258))
        self.assertIsNone(pyramid.tile(13, 24, 0))
        self.assertIsNone(pyramid.tile(14, 0, 0))

    def test_the_tiles_a_pager_viewport_needs(self) -> None:
        pyramid = TilePyramid(6000, 4000)
        # A 2560x1440 screen showing the whole photo (scale 0.36): level 12, every tile of it.
        self.assertEqual(pyramid.level_for_scale(0.36), 12)
        whole = pyramid.tiles_covering((0, 0, 6000, 4000), 0.36)
        self.assertEqual(len(whole), 12 * 8)
        self.assertEqual({t.level for t in whole}, {12})
        # Full scale on the centre: level 13, columns 6-16 and rows 5-10 under a 2560x1440 window.
        centre = pyramid.tiles_covering((1720, 1280, 2560, 1440), 1)
        self.assertEqual({t.level for t in centre}, {13})
        self.assertEqual({t.column for t in centre}, set(range(6, 17)))
        self.assertEqual({t.row for t in centre}, set(range(5, 11)))
        self.assertEqual(pyramid.tiles_covering((7000, 0, 100, 100), 1), [])
        self.assertEqual([pyramid.level_for_scale(s) for s in (2, 1, 0.75, 0.5, 0.25, 0.1, 0.0001)],
                         [13, 13, 13, 12, 11, 10, 0])

    def test_levels_of_an_odd_size_as_dzsave_cuts_them(self) -> None:
        pyramid = TilePyramid(1000, 333)
        self.assertEqual([pyramid.size(level) for level in pyramid.levels],
                         [(1, 1), (2, 1), (4, 2), (8, 3), (16, 6), (32, 11), (63, 21), (125, 42), (250, 84),
                          (500, 167), (1000, 333)])

    def test_tiles_cover_each_level_exactly_once_without_overlap(self) -> None:
        for tile_size, overlap in ((256, 1), (256, 0), (512, 1), (512, 0)):
            pyramid = TilePyramid(6000, 4000, tile_size, overlap)
            for level in pyramid.levels:
                width, height = pyramid.size(level)
                columns, rows = pyramid.grid(level)
                row0 = [pyramid.tile(level, c, 0) for c in range(columns)]
                inner = sum(t.width for t in row0) - 2 * overlap * (columns - 1)
                self.assertEqual(inner, width, f"level {level} ({tile_size}/{overlap})")
                column0 = [pyramid.tile(level, 0, r) for r in range(rows)]
                self.assertEqual(sum(t.height for t in column0) - 2 * overlap * (rows - 1), height)

    def test_address_is_what_a_render_sends(self) -> None:
        pyramid = TilePyramid(6000, 4000, 512, 0)
        tile = pyramid.tile(12, 5, 3)
        self.assertEqual(tile, Tile(12, 5, 3, 2560, 1536, 440, 464))
        self.assertEqual(pyramid.address(tile), p.TileAddress(12, 5, 3, 512, 0))


class RegionAndTileFieldTests(unittest.TestCase):
    def test_round_trip_in_prefetch_too(self) -> None:
        spec = p.Spec(256, 256, region=p.Region(1, 2, 3, 4))
        for message in (p.Prefetch(["/a.jpg"], spec), p.StopPrefetch(["/a.jpg"], p.Spec(tile=p.TileAddress(3, 1, 0, 512, 0)))):
            frames = p.FrameDecoder().feed(p.encode(message, 5))
            self.assertEqual(p.decode(frames[0]), message)

    def test_a_field_of_the_wrong_length_is_malformed(self) -> None:
        path = field(1, b"/a.jpg")
        for tag, length in ((15, 15), (15, 17), (16, 11), (16, 13)):
            with self.subTest(tag=tag, length=length):
                with self.assertRaises(p.MalformedFrame):
                    p.decode(p.Frame(p.MessageType.RENDER, 1, path + field(tag, bytes(length))))


def field(tag: int, value: bytes) -> bytes:
    return struct.pack("<HI", tag, len(value)) + value


if __name__ == "__main__":
    unittest.main()
