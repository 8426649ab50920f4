"""An image's Deep Zoom (DZI) tile pyramid: which tiles a zoomed viewport needs.

Mirrors ``Sources/ViewerProtocol/TilePyramid.swift`` to the pixel, so that a Python viewer asks
for the very tiles the daemon cuts (PROTOCOL.md, "Regions and tiles"): level ``top`` is the
upright image at full size, each level below is half the one above (sides rounded up) down to
1×1 at level 0; a level is cut into ``tile_size`` squares from its top-left corner, each tile
widened by ``overlap`` pixels on every side that has a neighbour.

>>> pyramid = TilePyramid(6000, 4000)
>>> pyramid.top, pyramid.size(12), pyramid.grid(12)
(13, (3000, 2000), (12, 8))
>>> pyramid.level_for_scale(0.36)
12
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

from .protocol import TileAddress


class Tile(NamedTuple):
    """One tile of a level: its place on the grid and its pixels in the level's coordinates,
    overlap included."""

    level: int
    column: int
    row: int
    x: int
    y: int
    width: int
    height: int


class TilePyramid:
    """The pyramid of an upright image of ``width`` × ``height`` (INFO's size) on a grid of
    ``tile_size`` (256 or 512) with ``overlap`` (0 or 1)."""

    def __init__(self, width: int, height: int, tile_size: int = 256, overlap: int = 1) -> None:
        if width <= 0 or height <= 0 or tile_size <= 0 or not 0 <= overlap < tile_size:
            raise ValueError(f"no pyramid for {width}x{height}, tile {tile_size}, overlap {overlap}")
        self.width, self.height, self.tile_size, self.overlap = width, height, tile_size, overlap

    @property
    def top(self) -> int:
        """The full-size level: ⌈log₂ max(width, height)⌉ (0 for a 1×1 image)."""
        return (max(self.width, self.height) - 1).bit_length()

    @property
    def levels(self) -> range:
        """Every level, 0 to ``top``."""
        return range(self.top + 1)

    def size(self, level: int) -> Tuple[int, int]:
        """A level's size: the full size divided by 2^(top − level), rounded up."""
        self._check(level)
        shift = self.top - level
        return (-(-self.width >> shift), -(-self.height >> shift))

    def grid(self, level: int) -> Tuple[int, int]:
        """How many columns and rows of tiles a level has."""
        width, height = self.size(level)
        return (-(-width // self.tile_size), -(-height // self.tile_size))

    def tile(self, level: int, column: int, row: int) -> Optional[Tile]:
        """The tile at ``column``, ``row`` of ``level``; None past the level's edge."""
        if level not in self.levels:
            return None
        (width, height), (columns, rows) = self.size(level), self.grid(level)
        if not (0 <= column < columns and 0 <= row < rows):
            return None
        x, w = self._span(column, width)
        y, h = self._span(row, height)
        return Tile(level, column, row, x, y, w, h)

    def address(self, tile: Tile) -> TileAddress:
        """What a RENDER sends for ``tile`` (``Spec(tile=...)``)."""
        return TileAddress(tile.level, tile.column, tile.row, self.tile_size, self.overlap)

    def level_for_scale(self, scale: float) -> int:
        """The level whose resolution is the nearest at or above ``scale`` (pixels shown per
        pixel of the full image): the top for 1 or more, one level down for each halving."""
        if scale >= 1:
            return self.top
        level = self.top
        while level > 0 and (1 << (self.top - level + 1)) * scale <= 1:
            level -= 1
        return level

    def tiles_covering(self, viewport: Tuple[float, float, float, float], scale: float) -> List[Tile]:
        """The tiles that cover ``viewport`` (x, y, width, height in the full image's pixels) at
        the level ``level_for_scale`` picks, row by row; none when it lies outside the image."""
        level = self.level_for_scale(scale)
        level_width, level_height = self.size(level)
        factor = level_width / self.width
        columns, rows = self.grid(level)
        x, y, width, height = viewport
        left, top = max(0.0, x * factor), max(0.0, y * factor)
        right = min(float(level_width), (x + width) * factor)
        bottom = min(float(level_height), (y + height) * factor)
        if right <= left or bottom <= top:
            return []
        first_column, last_column = int(left) // self.tile_size, min(columns - 1, math.ceil(right - 1) // self.tile_size)
        first_row, last_row = int(top) // self.tile_size, min(rows - 1, math.ceil(bottom - 1) // self.tile_size)
        return [tile for row in range(first_row, last_row + 1) for column in range(first_column, last_column + 1)
                if (tile := self.tile(level, column, row)) is not None]

    def _span(self, index: int, length: int) -> Tuple[int, int]:
        start = index * self.tile_size - (self.overlap if index > 0 else 0)
        end = min((index + 1) * self.tile_size + self.overlap, length)
        return start, end - start

    def _check(self, level: int) -> None:
        if level not in self.levels:
            raise ValueError(f"level {level} is not in 0...{self.top}")

