"""What the blocking and asyncio clients share: building requests and reading answers."""
from __future__ import annotations

import math
import os
from typing import Any, List, Optional, Tuple, Union

from . import protocol as p
from .errors import ViewerError

FitLike = Union[p.Fit, int, str]


def _enum(kind, value, option: str):  # type: ignore[no-untyped-def]
    """``value`` as a member of ``kind``: a member, its number, or its name in any case (with
    ``-`` or ``_``); else a ValueError that lists the names ``option`` takes."""
    try:
        if isinstance(value, str):
            return kind[value.upper().replace("-", "_")]
        return kind(value)
    except (KeyError, ValueError):
        valid = ", ".join(str(member) for member in kind)
        raise ValueError(f"{option} must be one of {valid} (got {value!r})") from None


def _time_ms(time: Optional[float]) -> Optional[int]:
    """Seconds from a video's start, as ``viewerctl render --time`` takes them, in the
    milliseconds RENDER's ``time`` carries (PROTOCOL.md, "Videos")."""
    if time is None:
        return None
    if isinstance(time, bool) or not isinstance(time, (int, float)):
        raise TypeError(f"time takes seconds from the video's start, e.g. 12.5 (got {time!r})")
    if not (math.isfinite(time) and time >= 0 and time * 1000 < 0xFFFFFFFF):
        raise ValueError(f"time takes seconds from the video's start, 0 to 4294967, e.g. 12.5 (got {time!r})")
    return math.floor(time * 1000 + 0.5)  # half away from zero, as viewerctl rounds


def absolute(path: Union[str, "os.PathLike[str]"]) -> str:
    """A relative path resolved against this process's working directory (``os.getcwd()``,
    the kernel's, with ``.`` and ``..`` then taken lexically and no symlink followed), as
    viewerctl and Swift's ViewerClient do: the daemon takes absolute paths only. An absolute
    path is sent as it is; a ``pathlib.Path`` is taken too."""
    path = os.fspath(path)
    return path if path.startswith("/") else os.path.normpath(os.path.join(os.getcwd(), path))


def make_spec(width: int = 0, height: int = 0, fit: FitLike = p.Fit.FIT, crop: Union[p.Crop, int, str] = p.Crop.CENTRE,
              format: Union[p.Format, int, str] = p.Format.JPEG, quality: int = 0, background: int = 0xFFFFFF,
              page: int = 0, upscale: bool = False, time: Optional[float] = None,
              region: Optional[Tuple[int, int, int, int]] = None, tile: Optional[p.TileAddress] = None,
              rotation: int = 0, mirror: bool = False, colour: Union[p.Colour, int, str] = p.Colour.COLOUR) -> p.Spec:
    """The spec the clients' keyword options describe; ``time`` in seconds."""
    return p.Spec(width, height, _enum(p.Fit, fit, "fit"), _enum(p.Crop, crop, "crop"),
                  _enum(p.Format, format, "format"), quality, background, page, upscale, _time_ms(time),
                  p.Region(*region) if region is not None else None, tile, rotation, mirror,
                  _enum(p.Colour, colour, "colour"))


def make_render(path: Optional[str], fd: Optional[int], spec: p.Spec, priority: Union[p.Priority, int, str],
                delivery: Union[p.Delivery, int, str], allow_larger: bool, source_info: bool = False,
                shared_memory: bool = False) -> p.Render:
    """A RENDER; by path, a relative ``path`` is resolved here (:func:`absolute`); with a
    descriptor, ``path`` only names the file and is sent as given."""
    if path is None and fd is None:
        raise ValueError("render needs a path or a descriptor")
    if fd is None:
        assert path is not None
        path = absolute(path)
    return p.Render(path or "", spec, _enum(p.Priority, priority, "priority"),
                    _enum(p.Delivery, delivery, "delivery"), allow_larger, source_info, shared_memory)


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


def make_layout(paths: Optional[List[str]], folder: Optional[str], order: Any, offset: int, limit: int) -> "p.Layout":
    """A LAYOUT of ``paths`` or of ``folder`` (relative ones resolved as by ``absolute``)."""
    if (paths is None) == (folder is None):
        raise ValueError("layout needs either paths or a folder")
    if paths is not None:
        return p.Layout(paths=[absolute(path) for path in paths], limit=limit)
    return p.Layout(folder=absolute(folder or ""), order=_enum(p.LayoutOrder, order, "order"), offset=offset, limit=limit)
