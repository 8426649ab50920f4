"""The viewerd wire format, version 1: frames, fields and messages, with no I/O.

Mirrors ``Sources/ViewerProtocol`` (``Frame``, ``FrameDecoder``, ``Fields``, ``Message``,
``MessageCodec``); PROTOCOL.md is the contract. Encoders write fields in ascending tag order,
as the Swift encoder does, so that a decoded golden vector re-encodes to its exact bytes.

>>> frame = encode(Ping(), request_id=11)
>>> decoder = FrameDecoder()
>>> [decode(f) for f in decoder.feed(frame)]
[Ping()]
"""
from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Tuple, Union

from . import thumbhash

MAGIC = b"VWRD"
FRAMING_VERSION = 1
HEADER_SIZE = 16
PROTOCOL_VERSION = 1
FLAG_DESCRIPTOR = 0x0001

_HEADER = struct.Struct("<4sBBHII")
_FIELD = struct.Struct("<HI")


class MalformedFrame(ValueError):
    """Bytes that are not a valid frame or body (the daemon's ``malformed-frame``)."""


class _Named:
    """Prints as its name in the options' spelling (``jpeg``, ``cache-only``, ``photo``), as
    Swift's clients print theirs; ``repr`` and ``int`` still show the number. A name printed
    is a value the clients' options take back: ``format=str(result.format)``."""

    name: str

    def __str__(self) -> str:
        return self.name.lower().replace("_", "-")

    def __format__(self, spec: str) -> str:
        if spec and spec[-1] in "bcdoxXn":
            return format(int(self), spec)  # type: ignore[call-overload]
        return format(str(self), spec)


class MessageType(_Named, enum.IntEnum):
    HELLO = 0x01
    RENDER = 0x02
    CANCEL = 0x03
    SET_PRIORITY = 0x04
    PREFETCH = 0x05
    STOP_PREFETCH = 0x06
    STOP_PREFETCH_ALL = 0x07
    INVALIDATE = 0x08
    STATS = 0x09
    PING = 0x0A
    TRIM = 0x0B
    INFO = 0x0C
    LAYOUT = 0x0D
    WELCOME = 0x81
    RESULT = 0x82
    PREVIEW = 0x83
    ERROR = 0x84
    CANCELLED = 0x85
    STATS_REPLY = 0x86
    PONG = 0x87
    ACK = 0x88
    INFO_REPLY = 0x89
    LAYOUT_ITEMS = 0x8A


class Fit(_Named, enum.IntEnum):
    FIT = 0
    FILL = 1
    #: Exactly the box, the aspect ratio not kept (IIIF's ``w,h``); both sides needed.
    STRETCH = 2


class Colour(_Named, enum.IntEnum):
    """RENDER tag 21: the rendition's colours, after the rotation (IIIF's quality)."""

    COLOUR = 0
    #: One band, the luminance.
    GRAY = 1
    #: One band, black or white: the gray thresholded at mid-grey.
    BITONAL = 2


class Crop(_Named, enum.IntEnum):
    CENTRE = 1
    ATTENTION = 2
    ENTROPY = 3


class Format(_Named, enum.IntEnum):
    JPEG = 1
    WEBP = 2
    PNG = 3
    AVIF = 4
    RAW = 5
    GIF = 6


class Priority(_Named, enum.IntEnum):
    VISIBLE = 0
    HIGH = 1
    NORMAL = 2
    PREFETCH = 3
    BACKGROUND = 4


class Delivery(_Named, enum.IntEnum):
    FINAL = 0
    OPPORTUNISTIC = 1
    CACHE_ONLY = 2


class Capability(enum.IntFlag):
    DESCRIPTOR_PASSING = 0x01
    PREVIEWS = 0x02
    PREFETCH = 0x04
    INVALIDATE = 0x08
    CANCELLATION = 0x10
    MEDIA_INFO = 0x20
    ZOOM = 0x40
    LAYOUT = 0x80
    #: A raw rendition asked with ``shared_memory`` comes as a sealed memfd (bit 8).
    SHARED_MEMORY = 0x100
    #: RENDER's rotation, mirror and colour (tags 19-21), fit ``stretch`` and ``gif`` (bit 9).
    TRANSFORMS = 0x200

    def __str__(self) -> str:
        """The names announced, ``|``-separated (``previews|zoom``), a newer daemon's bits in
        hex, ``none`` for none."""
        known = 0
        names = []
        for member in type(self):
            if member.value & self.value:
                names.append(member.name.lower().replace("_", "-"))  # type: ignore[union-attr]
                known |= member.value
        if self.value & ~known:
            names.append(hex(self.value & ~known))
        return "|".join(names) or "none"

    def __format__(self, spec: str) -> str:
        if spec and spec[-1] in "bcdoxXn":
            return format(int(self), spec)
        return format(str(self), spec)


class MediaKind(_Named, enum.IntEnum):
    PHOTO = 0
    VIDEO = 1
    VECTOR = 2
    ANIMATED = 3


class LayoutOrder(_Named, enum.IntEnum):
    """The order of a folder's files in a LAYOUT: by name (UTF-8 bytes), or newest modified first."""
    NAME = 0
    MODIFIED = 1


class HDRTransfer(_Named, enum.IntEnum):
    """An HDR source's transfer, numbered as ITU-T H.273 numbers it (PROTOCOL.md, INFO_REPLY)."""
    PQ = 16
    HLG = 18


# ---------------------------------------------------------------- frames


@dataclass(frozen=True)
class Frame:
    """One frame: the header's type, flags and request id, and the body's bytes."""

    type: int
    request_id: int
    body: bytes = b""
    flags: int = 0

    def encode(self) -> bytes:
        return _HEADER.pack(MAGIC, FRAMING_VERSION, self.type, self.flags, self.request_id, len(self.body)) + self.body

    @property
    def carries_descriptor(self) -> bool:
        return bool(self.flags & FLAG_DESCRIPTOR)


class FrameDecoder:
    """Cuts a byte stream into frames, whatever the reads' boundaries.

    ``max_body`` bounds a body (the WELCOME's ``max_response_body`` on a client); a header over
    it, or with bad magic or framing version, raises :class:`MalformedFrame` and the stream is
    unusable from then on."""

    def __init__(self, max_body: int = 0xFFFFFFFF) -> None:
        self.max_body = max_body
        self._buffer = bytearray()

    def feed(self, data: bytes) -> List[Frame]:
        """Adds ``data`` and returns every frame now complete, in order."""
        self._buffer += data
        frames: List[Frame] = []
        while len(self._buffer) >= HEADER_SIZE:
            magic, version, mtype, flags, request_id, length = _HEADER.unpack_from(self._buffer)
            if magic != MAGIC or version != FRAMING_VERSION:
                raise MalformedFrame("not a viewerd frame (bad magic or framing version)")
            if length > self.max_body:
                raise MalformedFrame(f"frame body of {length} bytes is over the limit of {self.max_body}")
            end = HEADER_SIZE + length
            if len(self._buffer) < end:
                break
            frames.append(Frame(mtype, request_id, bytes(self._buffer[HEADER_SIZE:end]), flags))
            del self._buffer[:end]
        return frames

    @property
    def buffered(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return len(self._buffer)


# ---------------------------------------------------------------- fields


def parse_fields(body: bytes) -> Dict[int, bytes]:
    """The body's fields by tag; raises :class:`MalformedFrame` on a cut or repeated field."""
    fields: Dict[int, bytes] = {}
    offset = 0
    while offset < len(body):
        if len(body) - offset < _FIELD.size:
            raise MalformedFrame(f"field header at offset {offset} is cut short")
        tag, length = _FIELD.unpack_from(body, offset)
        offset += _FIELD.size
        if length > len(body) - offset:
            raise MalformedFrame(f"field {tag} runs past the end of the body")
        if tag in fields:
            raise MalformedFrame(f"field {tag} appears twice")
        fields[tag] = bytes(body[offset:offset + length])
        offset += length
    return fields


class _Writer:
    def __init__(self) -> None:
        self.parts: List[bytes] = []

    def raw(self, tag: int, value: bytes) -> "_Writer":
        self.parts.append(_FIELD.pack(tag, len(value)) + value)
        return self

    def u8(self, tag: int, value: int) -> "_Writer":
        return self.raw(tag, struct.pack("<B", value))

    def u16(self, tag: int, value: int) -> "_Writer":
        return self.raw(tag, struct.pack("<H", value))

    def u32(self, tag: int, value: int) -> "_Writer":
        return self.raw(tag, struct.pack("<I", value))

    def u64(self, tag: int, value: int) -> "_Writer":
        return self.raw(tag, struct.pack("<Q", value))

    def string(self, tag: int, value: str) -> "_Writer":
        return self.raw(tag, value.encode("utf-8"))

    def bytes(self) -> bytes:
        return b"".join(self.parts)


class _Reader:
    def __init__(self, body: bytes) -> None:
        self.fields = parse_fields(body)

    def _int(self, tag: int, width: int, fmt: str, default: Optional[int]) -> int:
        value = self.fields.get(tag)
        if value is None:
            if default is None:
                raise MalformedFrame(f"required field {tag} is missing")
            return default
        if len(value) != width:
            raise MalformedFrame(f"field {tag} has {len(value)} bytes, expected {width}")
        return int(struct.unpack(fmt, value)[0])

    def u8(self, tag: int, default: Optional[int] = None) -> int:
        return self._int(tag, 1, "<B", default)

    def u16(self, tag: int, default: Optional[int] = None) -> int:
        return self._int(tag, 2, "<H", default)

    def u32(self, tag: int, default: Optional[int] = None) -> int:
        return self._int(tag, 4, "<I", default)

    def u64(self, tag: int, default: Optional[int] = None) -> int:
        return self._int(tag, 8, "<Q", default)

    def bool(self, tag: int, default: bool = False) -> bool:
        return self.u8(tag, int(default)) != 0

    def enum(self, tag: int, kind, default: Optional[int] = None):  # type: ignore[no-untyped-def]
        value = self.u8(tag, default)
        try:
            return kind(value)
        except ValueError:
            raise MalformedFrame(f"field {tag}: {value} is not a valid {kind.__name__}") from None

    def string(self, tag: int, default: Optional[str] = None) -> str:
        value = self.fields.get(tag)
        if value is None:
            if default is None:
                raise MalformedFrame(f"required field {tag} is missing")
            return default
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedFrame(f"field {tag} is not UTF-8") from None

    def fixed(self, tag: int, width: int) -> bytes:
        """A present field of exactly ``width`` bytes (a region's 16, a tile's 12)."""
        value = self.fields[tag]
        if len(value) != width:
            raise MalformedFrame(f"field {tag} has {len(value)} bytes, expected {width}")
        return value

    def raw(self, tag: int, default: Optional[bytes] = None) -> bytes:
        value = self.fields.get(tag)
        if value is None:
            if default is None:
                raise MalformedFrame(f"required field {tag} is missing")
            return default
        return value


def encode_paths(paths: List[str]) -> bytes:
    """A path list: each path as a u32 length and its UTF-8 bytes."""
    out = []
    for path in paths:
        data = path.encode("utf-8")
        out.append(struct.pack("<I", len(data)) + data)
    return b"".join(out)


def decode_paths(value: bytes) -> List[str]:
    paths, offset = [], 0
    while offset < len(value):
        if len(value) - offset < 4:
            raise MalformedFrame("path list record cut short")
        (n,) = struct.unpack_from("<I", value, offset)
        offset += 4
        if n > len(value) - offset:
            raise MalformedFrame("path list record runs past the end")
        try:
            paths.append(value[offset:offset + n].decode("utf-8"))
        except UnicodeDecodeError:
            raise MalformedFrame("path is not UTF-8") from None
        offset += n
    return paths


def encode_counters(counters: Dict[str, int]) -> bytes:
    out = []
    for name, value in counters.items():
        data = name.encode("utf-8")[:255]
        out.append(struct.pack("<B", len(data)) + data + struct.pack("<Q", value))
    return b"".join(out)


def decode_counters(value: bytes) -> Dict[str, int]:
    counters: Dict[str, int] = {}
    offset = 0
    while offset < len(value):
        n = value[offset]
        offset += 1
        if n + 8 > len(value) - offset:
            raise MalformedFrame("counter record cut short")
        try:
            name = value[offset:offset + n].decode("utf-8")
        except UnicodeDecodeError:
            raise MalformedFrame("counter name is not UTF-8") from None
        (counters[name],) = struct.unpack_from("<Q", value, offset + n)
        offset += n + 8
    return counters


# ---------------------------------------------------------------- messages


class Region(NamedTuple):
    """A rectangle of the upright image in its pixels at full size (RENDER tag 15): only that
    part is rendered, fitted into the box (PROTOCOL.md, "Regions and tiles")."""

    x: int
    y: int
    width: int
    height: int


class TileAddress(NamedTuple):
    """One tile of the image's Deep Zoom pyramid (RENDER tag 16); see :mod:`viewerd.pyramid`
    for which tiles a viewport needs. ``size`` is 256 or 512, ``overlap`` 0 or 1."""

    level: int
    column: int
    row: int
    size: int = 256
    overlap: int = 1


_REGION = struct.Struct("<IIII")
_TILE = struct.Struct("<BBHII")


@dataclass
class Spec:
    """What a rendition is: RENDER's fields 2 to 10, 14 to 16 and 19 to 21, shared with
    PREFETCH and STOP_PREFETCH."""

    width: int = 0
    height: int = 0
    fit: Fit = Fit.FIT
    crop: Crop = Crop.CENTRE
    format: Format = Format.JPEG
    quality: int = 0
    background: int = 0xFFFFFF
    page: int = 0
    upscale: bool = False
    #: For a video: the frame shown this many milliseconds from its start (tag 14); None: a
    #: representative frame. Ignored for images.
    time_ms: Optional[int] = None
    #: Only this part of the upright image, (x, y, width, height) in its pixels (tag 15).
    region: Optional[Region] = None
    #: One tile of the pyramid instead of a box (tag 16); the box, fit and upscale are ignored.
    tile: Optional[TileAddress] = None
    #: Degrees clockwise, 0-359, after the resize and the mirroring (tag 19).
    rotation: int = 0
    #: Flipped left to right after the resize, before the rotation (tag 20; IIIF's ``!``).
    mirror: bool = False
    #: Gray or bitonal after the rotation (tag 21).
    colour: Colour = Colour.COLOUR

    def _write(self, w: _Writer) -> None:
        (w.u32(2, self.width).u32(3, self.height).u8(4, self.fit).u8(5, self.crop).u8(6, self.format)
         .u8(7, self.quality).u32(8, self.background).u32(9, self.page).u8(10, int(self.upscale)))

    def _write_additions(self, w: _Writer) -> None:
        """Tags 14 to 16, each when set, after the message's other fields (senders write tags
        in order, and these came later)."""
        if self.time_ms is not None:
            w.u32(14, self.time_ms)
        if self.region is not None:
            w.raw(15, _REGION.pack(*self.region))
        if self.tile is not None:
            t = self.tile
            w.raw(16, _TILE.pack(t.level, t.overlap, t.size, t.column, t.row))

    def _write_transforms(self, w: _Writer) -> None:
        """Tags 19 to 21, each when not the default, after every other field."""
        if self.rotation:
            w.u16(19, self.rotation)
        if self.mirror:
            w.u8(20, 1)
        if self.colour != Colour.COLOUR:
            w.u8(21, self.colour)

    @classmethod
    def _read(cls, r: _Reader) -> "Spec":
        quality = r.u8(7, 0)
        if quality > 100:
            raise MalformedFrame(f"quality {quality} is over 100")
        time_ms = r.u32(14, 0) if 14 in r.fields else None
        region = Region(*_REGION.unpack(r.fixed(15, _REGION.size))) if 15 in r.fields else None
        tile = None
        if 16 in r.fields:
            level, overlap, size, column, row = _TILE.unpack(r.fixed(16, _TILE.size))
            tile = TileAddress(level, column, row, size, overlap)
        return cls(r.u32(2, 0), r.u32(3, 0), r.enum(4, Fit, 0), r.enum(5, Crop, 1), r.enum(6, Format, 1),
                   quality, r.u32(8, 0xFFFFFF), r.u32(9, 0), r.bool(10), time_ms, region, tile,
                   r.u16(19, 0), r.bool(20), r.enum(21, Colour, 0))


@dataclass
class Hello:
    min_version: int = PROTOCOL_VERSION
    max_version: int = PROTOCOL_VERSION
    client_name: str = ""


@dataclass
class Welcome:
    version: int
    max_request_body: int
    max_response_body: int
    server_version: str = ""
    capabilities: Capability = Capability(0)
    max_outstanding: int = 0


@dataclass
class Render:
    path: str
    spec: Spec = field(default_factory=Spec)
    priority: Priority = Priority.NORMAL
    delivery: Delivery = Delivery.FINAL
    allow_larger: bool = False
    #: Ask for the original's media info in the RESULT (tag 17; ``Result.source``).
    source_info: bool = False
    #: For ``raw``: the pixels may come as a sealed memfd attached to the RESULT (tag 18).
    shared_memory: bool = False


@dataclass(repr=False)
class Rendition:
    """A RESULT or a PREVIEW: the image bytes in ``format``, ``width`` × ``height``. ``source``:
    the original's media info (what INFO answers), in the RESULT of a RENDER that asked for it
    (``source_info``) when the server knew it; else None (ask INFO). ``source_partial``: the
    original's data ended early (a file still being copied): the image shows what it held, and
    the daemon did not store it. ``shared_bytes``: on the wire, the rendition is the first this
    many bytes of the memfd attached to the frame (field 8) and the body has no ``data``; the
    client then maps it read-only and ``data`` is a read-only ``memoryview`` of the mapping,
    unmapped when the last reference to it goes."""

    format: Format
    width: int
    height: int
    data: Union[bytes, memoryview]
    from_cache: bool = False
    source: Optional[InfoReply] = None
    source_partial: bool = False
    shared_bytes: Optional[int] = None

    def __repr__(self) -> str:
        # The bytes' length, not the bytes: print(result) of a thumbnail is one line.
        return (f"{type(self).__name__}(format={self.format!r}, width={self.width}, height={self.height}, "
                f"data=<{len(self.data)} bytes>, from_cache={self.from_cache}, source={self.source!r}"
                + (", source_partial=True" if self.source_partial else "") + ")")


@dataclass(repr=False)
class Result(Rendition):
    pass


@dataclass(repr=False)
class Preview(Rendition):
    pass


@dataclass
class Error:
    code: int
    message: str = ""


@dataclass
class Cancel:
    pass


@dataclass
class Cancelled:
    pass


@dataclass
class SetPriority:
    priority: Priority


@dataclass
class Prefetch:
    paths: List[str]
    spec: Spec = field(default_factory=Spec)
    priority: Priority = Priority.PREFETCH


@dataclass
class StopPrefetch:
    paths: List[str]
    spec: Spec = field(default_factory=Spec)
    priority: Priority = Priority.PREFETCH


@dataclass
class StopPrefetchAll:
    pass


@dataclass
class Invalidate:
    path: str
    recursive: bool = False


@dataclass
class Trim:
    bytes: int


@dataclass
class Ack:
    count: int = 0


@dataclass
class Info:
    path: str


@dataclass
class InfoReply:
    """What a file is (PROTOCOL.md, INFO_REPLY): kind, upright size, a video's duration, frames or
    pages, format, and a placeholder to paint before any pixels: a ThumbHash, None when the daemon
    has none yet (:meth:`placeholder_image` decodes it)."""
    kind: MediaKind
    width: int
    height: int
    duration_ms: int = 0
    frames: int = 1
    pages: int = 1
    format: str = ""
    has_alpha: bool = False
    hdr: Optional["HDR"] = None
    placeholder: Optional[bytes] = None

    def placeholder_image(self) -> Optional[Tuple[int, int, bytes]]:
        """The placeholder as ``(width, height, rgba)``: RGBA 8-bit rows, at most 32 pixels a side;
        None without one (or for bytes that are not a ThumbHash)."""
        return thumbhash.decode(self.placeholder) if self.placeholder is not None else None


@dataclass
class Layout:
    """The media info of many files (PROTOCOL.md, LAYOUT): ``paths``, or the files of ``folder`` in
    ``order`` from ``offset``; at most ``limit`` items (0: the server's maximum)."""
    paths: Optional[List[str]] = None
    folder: Optional[str] = None
    order: LayoutOrder = LayoutOrder.NAME
    offset: int = 0
    limit: int = 0


@dataclass
class LayoutItem:
    """One file of a LAYOUT: its ``info``, or its ``error`` (code and message), or ``info_pending``
    (the same index comes again). ``path`` in folder mode. A later item of an index replaces it."""
    index: int
    path: Optional[str] = None
    info: Optional[InfoReply] = None
    error: Optional["Error"] = None
    info_pending: bool = False
    placeholder_pending: bool = False

    @property
    def final(self) -> bool:
        """Whether no later item of this index follows."""
        return not self.info_pending and not self.placeholder_pending


@dataclass
class LayoutItems:
    """Some items of a LAYOUT (not terminal); ``total``: the files the LAYOUT covers."""
    total: int
    items: List[LayoutItem] = field(default_factory=list)


@dataclass
class HDR:
    """How a source is HDR: its transfer, H.273 primaries (9 BT.2020, 12 P3, 1 BT.709) and the
    peak it says in nits (None when it does not)."""
    transfer: HDRTransfer
    primaries: int = 2
    peak_nits: Optional[int] = None


@dataclass
class Stats:
    pass


@dataclass
class StatsReply:
    counters: Dict[str, int] = field(default_factory=dict)


@dataclass
class Ping:
    pass


@dataclass
class Pong:
    pass


Message = Union[Hello, Welcome, Render, Result, Preview, Error, Cancel, Cancelled, SetPriority, Prefetch,
                StopPrefetch, StopPrefetchAll, Invalidate, Trim, Ack, Stats, StatsReply, Ping, Pong, Info, InfoReply,
                Layout, LayoutItems]

_EMPTY = {Cancel: MessageType.CANCEL, Cancelled: MessageType.CANCELLED, StopPrefetchAll: MessageType.STOP_PREFETCH_ALL,
          Stats: MessageType.STATS, Ping: MessageType.PING, Pong: MessageType.PONG}

#: The answers that end a request; PREVIEW and LAYOUT_ITEMS are the server → client messages that do not.
TERMINAL = (Result, Error, Cancelled, Ack, StatsReply, Pong, Welcome, InfoReply)


def encode_body(message: Message) -> Tuple[MessageType, bytes]:
    """The message's type and body bytes."""
    w = _Writer()
    if isinstance(message, Hello):
        w.u16(1, message.min_version).u16(2, message.max_version).string(3, message.client_name)
        return MessageType.HELLO, w.bytes()
    if isinstance(message, Welcome):
        (w.u16(1, message.version).string(2, message.server_version).u32(3, message.max_request_body)
         .u32(4, message.max_response_body).u64(5, int(message.capabilities)).u32(6, message.max_outstanding))
        return MessageType.WELCOME, w.bytes()
    if isinstance(message, Render):
        w.string(1, message.path)
        message.spec._write(w)
        w.u8(11, message.priority).u8(12, message.delivery)
        if message.allow_larger:
            w.u8(13, 1)
        message.spec._write_additions(w)
        if message.source_info:
            w.u8(17, 1)
        if message.shared_memory:
            w.u8(18, 1)
        message.spec._write_transforms(w)
        return MessageType.RENDER, w.bytes()
    if isinstance(message, Rendition):
        w.u8(1, message.format).u32(2, message.width).u32(3, message.height).u8(4, int(message.from_cache))
        if message.source is not None:
            w.raw(6, encode_body(message.source)[1])  # before the bytes: they stay the last field
        if message.source_partial:
            w.u8(7, 1)
        if message.shared_bytes is not None:
            w.u32(8, message.shared_bytes)  # the pixels are in the attached descriptor
        else:
            w.raw(5, bytes(message.data))
        return (MessageType.PREVIEW if isinstance(message, Preview) else MessageType.RESULT), w.bytes()
    if isinstance(message, Error):
        w.u16(1, message.code).string(2, message.message)
        return MessageType.ERROR, w.bytes()
    if isinstance(message, SetPriority):
        w.u8(1, message.priority)
        return MessageType.SET_PRIORITY, w.bytes()
    if isinstance(message, (Prefetch, StopPrefetch)):
        w.raw(1, encode_paths(message.paths))
        message.spec._write(w)
        w.u8(11, message.priority)
        message.spec._write_additions(w)
        message.spec._write_transforms(w)
        return (MessageType.PREFETCH if isinstance(message, Prefetch) else MessageType.STOP_PREFETCH), w.bytes()
    if isinstance(message, Invalidate):
        w.string(1, message.path).u8(2, int(message.recursive))
        return MessageType.INVALIDATE, w.bytes()
    if isinstance(message, Trim):
        w.u64(1, message.bytes)
        return MessageType.TRIM, w.bytes()
    if isinstance(message, Ack):
        w.u64(1, message.count)
        return MessageType.ACK, w.bytes()
    if isinstance(message, Info):
        w.string(1, message.path)
        return MessageType.INFO, w.bytes()
    if isinstance(message, InfoReply):
        (w.u8(1, message.kind).u32(2, message.width).u32(3, message.height).u64(4, message.duration_ms)
         .u32(5, message.frames).u32(6, message.pages).string(7, message.format).u8(8, int(message.has_alpha)))
        if message.hdr is not None:
            w.u8(9, message.hdr.transfer).u8(10, message.hdr.primaries)
            if message.hdr.peak_nits is not None:
                w.u32(11, message.hdr.peak_nits)
        if message.placeholder is not None:
            w.raw(12, message.placeholder)
        return MessageType.INFO_REPLY, w.bytes()
    if isinstance(message, Layout):
        if (message.paths is None) == (message.folder is None):
            raise ValueError("a LAYOUT names either paths or a folder")
        if message.paths is not None:
            w.raw(1, encode_paths(message.paths))
        else:
            w.string(2, message.folder or "").u8(3, message.order).u32(4, message.offset)
        w.u32(5, message.limit)
        return MessageType.LAYOUT, w.bytes()
    if isinstance(message, LayoutItems):
        packed = []
        for item in message.items:
            iw = _Writer().u32(1, item.index)
            if item.path is not None:
                iw.string(2, item.path)
            if item.info is not None:
                iw.raw(3, encode_body(item.info)[1])
            if item.error is not None:
                iw.u16(4, item.error.code).string(5, item.error.message)
            if item.info_pending:
                iw.u8(6, 1)
            if item.placeholder_pending:
                iw.u8(7, 1)
            body = iw.bytes()
            packed.append(struct.pack("<I", len(body)) + body)
        w.u32(1, message.total).raw(2, b"".join(packed))
        return MessageType.LAYOUT_ITEMS, w.bytes()
    if isinstance(message, StatsReply):
        w.raw(1, encode_counters(message.counters))
        return MessageType.STATS_REPLY, w.bytes()
    for kind, mtype in _EMPTY.items():
        if isinstance(message, kind):
            return mtype, b""
    raise TypeError(f"not a viewerd message: {message!r}")


def encode(message: Message, request_id: int, flags: int = 0) -> bytes:
    """A whole frame carrying ``message``."""
    mtype, body = encode_body(message)
    return Frame(mtype, request_id, body, flags).encode()


def decode(frame: Frame) -> Message:
    """The message a frame carries; :class:`MalformedFrame` for a bad body, ``ValueError`` for an
    unassigned type (a newer server's: skip it)."""
    t = frame.type
    if t in _EMPTY.values():
        parse_fields(frame.body)  # ignored, but must be well formed
        return next(kind for kind, mtype in _EMPTY.items() if mtype == t)()
    r = _Reader(frame.body)
    if t == MessageType.HELLO:
        return Hello(r.u16(1), r.u16(2), r.string(3, ""))
    if t == MessageType.WELCOME:
        return Welcome(r.u16(1), r.u32(3), r.u32(4), r.string(2, ""), Capability(r.u64(5, 0)), r.u32(6, 0))
    if t == MessageType.RENDER:
        return Render(r.string(1), Spec._read(r), r.enum(11, Priority, 2), r.enum(12, Delivery, 0), r.bool(13),
                      r.bool(17), r.bool(18))
    if t in (MessageType.RESULT, MessageType.PREVIEW):
        kind = Result if t == MessageType.RESULT else Preview
        source = _read_info(_Reader(r.raw(6))) if 6 in r.fields else None
        if 8 in r.fields:
            if 5 in r.fields:
                raise MalformedFrame("a rendition with both bytes (field 5) and shared_bytes (field 8)")
            return kind(r.enum(1, Format), r.u32(2), r.u32(3), b"", r.bool(4), source, r.bool(7), r.u32(8))
        return kind(r.enum(1, Format), r.u32(2), r.u32(3), r.raw(5), r.bool(4), source, r.bool(7))
    if t == MessageType.ERROR:
        return Error(r.u16(1), r.string(2, ""))
    if t == MessageType.SET_PRIORITY:
        return SetPriority(r.enum(1, Priority))
    if t in (MessageType.PREFETCH, MessageType.STOP_PREFETCH):
        kind2 = Prefetch if t == MessageType.PREFETCH else StopPrefetch
        return kind2(decode_paths(r.raw(1)), Spec._read(r), r.enum(11, Priority, 3))
    if t == MessageType.INVALIDATE:
        return Invalidate(r.string(1), r.bool(2))
    if t == MessageType.TRIM:
        return Trim(r.u64(1))
    if t == MessageType.ACK:
        return Ack(r.u64(1, 0))
    if t == MessageType.STATS_REPLY:
        return StatsReply(decode_counters(r.raw(1, b"")))
    if t == MessageType.INFO:
        return Info(r.string(1))
    if t == MessageType.INFO_REPLY:
        return _read_info(r)
    if t == MessageType.LAYOUT:
        if (1 in r.fields) == (2 in r.fields):
            raise MalformedFrame("a LAYOUT needs exactly one of paths (tag 1) and folder (tag 2)")
        if 1 in r.fields:
            return Layout(paths=decode_paths(r.raw(1)), limit=r.u32(5, 0))
        return Layout(folder=r.string(2), order=r.enum(3, LayoutOrder, 0), offset=r.u32(4, 0), limit=r.u32(5, 0))
    if t == MessageType.LAYOUT_ITEMS:
        return LayoutItems(r.u32(1), _read_layout_items(r.raw(2)))
    raise ValueError(f"unassigned message type 0x{t:02x}")


def _read_layout_items(packed: bytes) -> List[LayoutItem]:
    """LAYOUT_ITEMS' ``items``: each a u32 length and the item's own fields."""
    items, offset = [], 0
    while offset < len(packed):
        if len(packed) - offset < 4:
            raise MalformedFrame("layout item cut short")
        (n,) = struct.unpack_from("<I", packed, offset)
        offset += 4
        if n > len(packed) - offset:
            raise MalformedFrame("layout item runs past the end")
        r = _Reader(packed[offset:offset + n])
        offset += n
        info = _read_info(_Reader(r.raw(3))) if 3 in r.fields else None
        error = Error(r.u16(4), r.string(5, "")) if 4 in r.fields else None
        pending = r.bool(6)
        if (info is not None) + (error is not None) + pending != 1:
            raise MalformedFrame("a layout item needs exactly one of info, error_code and info_pending")
        items.append(LayoutItem(r.u32(1), r.string(2) if 2 in r.fields else None, info, error, pending, r.bool(7)))
    return items


def _read_info(r: _Reader) -> InfoReply:
    """An INFO_REPLY body's fields: also RESULT's ``source``, which holds one."""
    hdr = None
    if 9 in r.fields:
        hdr = HDR(r.enum(9, HDRTransfer), r.u8(10, 2), r.u32(11) if 11 in r.fields else None)
    placeholder = None
    if 12 in r.fields:
        placeholder = r.raw(12)
        if not 1 <= len(placeholder) <= MAX_PLACEHOLDER_BYTES:
            raise MalformedFrame(f"field 12 has {len(placeholder)} bytes, expected 1 to {MAX_PLACEHOLDER_BYTES}")
    return InfoReply(r.enum(1, MediaKind), r.u32(2), r.u32(3), r.u64(4, 0), r.u32(5, 1), r.u32(6, 1),
                     r.string(7, ""), r.bool(8), hdr, placeholder)


MAX_PLACEHOLDER_BYTES = 64
"""The longest INFO_REPLY ``placeholder``: a ThumbHash is at most 24 bytes, 25 with alpha."""
