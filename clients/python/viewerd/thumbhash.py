"""ThumbHash decoding (https://evanw.github.io/thumbhash/): INFO_REPLY's ``placeholder`` as pixels.

Pure Python. The arithmetic is the reference's (``thumbHashToRGBA``) in the same order, so the
pixels are the same bytes the reference and viewerd's Swift decoder give
(protocol/vectors/thumbhash/vectors.json). Bytes that are not a ThumbHash give None.

>>> width, height, rgba = decode(bytes.fromhex("5f1706558e7c057b6677779178b77674837055f7e9"))
>>> width, height, len(rgba)
(32, 23, 2944)
"""
from __future__ import annotations

import math
from typing import List, NamedTuple, Optional, Tuple

__all__ = ["decode", "average_color", "aspect_ratio"]


class _Header(NamedTuple):
    l_dc: float
    p_dc: float
    q_dc: float
    l_scale: float
    p_scale: float
    q_scale: float
    a_dc: float
    a_scale: float
    has_alpha: bool
    lx: int  # luminance terms across and down, as stored (1..7, 1..5 with alpha)
    ly: int
    ac_start: int


def _terms(nx: int, ny: int) -> int:
    return sum(1 for cy in range(ny) for cx in range(0 if cy else 1, nx) if cx * ny < nx * (ny - cy))


def _header(hash: bytes) -> Optional[_Header]:
    """None unless ``hash`` is exactly as long as its header says (as the Swift decoder)."""
    if len(hash) < 5:
        return None
    header24 = hash[0] | (hash[1] << 8) | (hash[2] << 16)
    header16 = hash[3] | (hash[4] << 8)
    has_alpha = header24 >> 23 != 0
    ac_start = 6 if has_alpha else 5
    if len(hash) < ac_start:
        return None
    is_landscape = header16 >> 15 != 0
    limit, stored = (5 if has_alpha else 7), header16 & 7
    if not 1 <= stored <= limit:
        return None
    lx, ly = (limit, stored) if is_landscape else (stored, limit)
    terms = _terms(max(3, lx), max(3, ly)) + 2 * _terms(3, 3) + (_terms(5, 5) if has_alpha else 0)
    if len(hash) != ac_start + (terms + 1) // 2:
        return None
    return _Header(
        l_dc=(header24 & 63) / 63,
        p_dc=((header24 >> 6) & 63) / 31.5 - 1,
        q_dc=((header24 >> 12) & 63) / 31.5 - 1,
        l_scale=((header24 >> 18) & 31) / 31,
        p_scale=((header16 >> 3) & 63) / 63,
        q_scale=((header16 >> 9) & 63) / 63,
        a_dc=(hash[5] & 15) / 15 if has_alpha else 1.0,
        a_scale=(hash[5] >> 4) / 15 if has_alpha else 0.0,
        has_alpha=has_alpha, lx=lx, ly=ly, ac_start=ac_start)


def _js_round(x: float) -> int:
    """JavaScript's ``Math.round``: ties toward +infinity."""
    down = math.floor(x)
    return down + 1 if x - down >= 0.5 else down


def _byte(v: float) -> int:
    """A ``Uint8Array`` store of ``max(0, 255 * min(1, v))``: truncated toward zero."""
    return int(max(0.0, 255 * min(1.0, v)))


def aspect_ratio(hash: bytes) -> Optional[float]:
    """The original's approximate width / height; None for bytes that are not a ThumbHash."""
    h = _header(bytes(hash))
    return h.lx / h.ly if h else None


def average_color(hash: bytes) -> Optional[Tuple[float, float, float, float]]:
    """The average colour (r, g, b, a), each 0..1, not premultiplied; None for bytes that are not
    a ThumbHash."""
    h = _header(bytes(hash))
    if h is None:
        return None
    b = h.l_dc - 2 / 3 * h.p_dc
    r = (3 * h.l_dc - b + h.q_dc) / 2
    g = r - h.q_dc
    return (max(0.0, min(1.0, r)), max(0.0, min(1.0, g)), max(0.0, min(1.0, b)), h.a_dc)


def decode(hash: bytes) -> Optional[Tuple[int, int, bytes]]:
    """The placeholder image ``(width, height, rgba)``: RGBA 8-bit rows, not premultiplied, at most
    32 pixels a side; None for bytes that are not a ThumbHash."""
    hash = bytes(hash)
    h = _header(hash)
    if h is None:
        return None
    lx, ly = max(3, h.lx), max(3, h.ly)
    index = 0

    def channel(nx: int, ny: int, scale: float) -> List[float]:
        nonlocal index
        ac = []
        for cy in range(ny):
            cx = 0 if cy else 1
            while cx * ny < nx * (ny - cy):
                nibble = (hash[h.ac_start + (index >> 1)] >> ((index & 1) << 2)) & 15
                ac.append((nibble / 7.5 - 1) * scale)
                index += 1
                cx += 1
        return ac

    l_ac = channel(lx, ly, h.l_scale)
    p_ac = channel(3, 3, h.p_scale * 1.25)  # saturation boosted against quantization, as the reference
    q_ac = channel(3, 3, h.q_scale * 1.25)
    a_ac = channel(5, 5, h.a_scale) if h.has_alpha else []

    ratio = h.lx / h.ly
    w = _js_round(32 if ratio > 1 else 32 * ratio)
    ht = _js_round(32 / ratio if ratio > 1 else 32)
    nfx, nfy = max(lx, 5 if h.has_alpha else 3), max(ly, 5 if h.has_alpha else 3)
    rgba = bytearray(w * ht * 4)
    i = 0
    for y in range(ht):
        fy = [math.cos(math.pi / ht * (y + 0.5) * cy) for cy in range(nfy)]
        for x in range(w):
            fx = [math.cos(math.pi / w * (x + 0.5) * cx) for cx in range(nfx)]
            l, p, q, a = h.l_dc, h.p_dc, h.q_dc, h.a_dc
            j = 0
            for cy in range(ly):
                cx, fy2 = (0 if cy else 1), fy[cy] * 2
                while cx * ly < lx * (ly - cy):
                    l += l_ac[j] * fx[cx] * fy2
                    cx += 1
                    j += 1
            j = 0
            for cy in range(3):
                cx, fy2 = (0 if cy else 1), fy[cy] * 2
                while cx < 3 - cy:
                    f = fx[cx] * fy2
                    p += p_ac[j] * f
                    q += q_ac[j] * f
                    cx += 1
                    j += 1
            if h.has_alpha:
                j = 0
                for cy in range(5):
                    cx, fy2 = (0 if cy else 1), fy[cy] * 2
                    while cx < 5 - cy:
                        a += a_ac[j] * fx[cx] * fy2
                        cx += 1
                        j += 1
            b = l - 2 / 3 * p
            r = (3 * l - b + q) / 2
            g = r - q
            rgba[i:i + 4] = bytes((_byte(r), _byte(g), _byte(b), _byte(a)))
            i += 4
    return w, ht, bytes(rgba)
