"""What the blocking and asyncio clients share: building requests and reading answers."""
from __future__ import annotations

from typing import Optional, Tuple, Union

from . import protocol as p
from .errors import ViewerError

FitLike = Union[p.Fit, int, str]


def _enum(kind, value):  # type: ignore[no-untyped-def]
    if isinstance(value, str):
        return kind[value.upper().replace("-", "_")]
    return kind(value)


def make_spec(width: int = 0, height: int = 0, fit: FitLike = p.Fit.FIT, crop: Union[p.Crop, int, str] = p.Crop.CENTRE,
              format: Union[p.Format, int, str] = p.Format.JPEG, quality: int = 0, background: int = 0xFFFFFF,
              page: int = 0, upscale: bool = False, time_ms: Optional[int] = None,
              region: Optional[Tuple[int, int, int, int]] = None, tile: Optional[p.TileAddress] = None) -> p.Spec:
    return p.Spec(width, height, _enum(p.Fit, fit), _enum(p.Crop, crop), _enum(p.Format, format), quality,
                  background, page, upscale, time_ms, p.Region(*region) if region is not None else None, tile)


def make_render(path: Optional[str], fd: Optional[int], spec: p.Spec, priority: Union[p.Priority, int, str],
                delivery: Union[p.Delivery, int, str], allow_larger: bool, source_info: bool = False) -> p.Render:
    if path is None and fd is None:
        raise ValueError("render needs a path or a descriptor")
    return p.Render(path or "", spec, _enum(p.Priority, priority), _enum(p.Delivery, delivery), allow_larger,
                    source_info)


def raise_if_error(message: p.Message, request_id: int) -> None:
    if isinstance(message, p.Error):
        error = ViewerError.from_code(message.code, message.message)
        error.request_id = request_id  # type: ignore[attr-defined]
        raise error


def expect(message: p.Message, kind: type, request_id: int):  # type: ignore[no-untyped-def]
    raise_if_error(message, request_id)
    if not isinstance(message, kind):
        raise ViewerError(100, "malformed-frame", f"expected {kind.__name__}, got {type(message).__name__}")
    return message


class IdCounter:
    """Request ids from 1, wrapping from 0xFFFFFFFF to 1 (0 is the handshake's)."""

    def __init__(self) -> None:
        self._next = 1

    def take(self) -> int:
        rid = self._next
        self._next = 1 if rid == 0xFFFFFFFF else rid + 1
        return rid
