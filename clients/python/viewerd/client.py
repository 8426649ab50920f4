"""The blocking client."""
from __future__ import annotations

import collections
import fcntl
import mmap
import os
import socket
import sys
import threading
import time
from typing import Callable, Deque, Dict, Iterator, List, Optional, Tuple, Union

from . import protocol as p
from ._common import make_layout, IdCounter, expect, absolute, make_render, make_spec, raise_if_error, _enum
from .errors import ConnectionLost, DaemonUnavailable, ViewerError
from .socketpath import connect_trusted, default_socket


class _Connection:
    """One connected socket after its handshake, and the answers that arrived on it, by id.

    State is guarded by ``cond``; one thread at a time reads the socket (``reading``), the
    others wait on ``cond`` for it to file their answers."""

    def __init__(self, path: str, client_name: str) -> None:
        self.sock = connect_trusted(path)
        self.decoder = p.FrameDecoder()
        self.cond = threading.Condition()
        self.send_lock = threading.Lock()
        self.inbox: Dict[int, Deque[p.Message]] = {}
        #: Requests abandoned (``RenderRequest.abandon``): answers dropped until the terminal one.
        self.abandoned: set = set()
        self.reading = False
        self.failure: Optional[BaseException] = None
        self.ids = IdCounter()
        #: Descriptors received and not yet claimed by their frames (flag ``descriptor``).
        self.descriptors: Deque[int] = collections.deque()
        self.inbox[0] = collections.deque()
        try:
            self.send(p.encode(p.Hello(client_name=client_name), 0))
            welcome = expect(self.next_answer(0), p.Welcome, 0)
        except ConnectionLost as error:
            self.sock.close()
            raise DaemonUnavailable(path, "it closed the connection before its WELCOME") from error
        except BaseException:
            self.sock.close()
            raise
        del self.inbox[0]  # from now on an ERROR with id 0 is about the connection
        self.welcome: p.Welcome = welcome
        self.decoder.max_body = welcome.max_response_body

    def send(self, frame: bytes, fd: Optional[int] = None) -> None:
        try:
            with self.send_lock:
                if fd is None:
                    self.sock.sendall(frame)
                else:
                    # The descriptor rides on the frame's first byte (PROTOCOL.md).
                    socket.send_fds(self.sock, [frame[:1]], [fd])
                    self.sock.sendall(frame[1:])
        except OSError as error:
            self.fail(ConnectionLost(f"viewerd connection lost: {error}"))
            raise ConnectionLost(f"viewerd connection lost: {error}") from error

    def register(self) -> int:
        with self.cond:
            if self.failure is not None:
                raise ConnectionLost(str(self.failure))
            rid = self.ids.take()
            while rid in self.inbox:
                rid = self.ids.take()
            self.inbox[rid] = collections.deque()
            return rid

    def forget(self, rid: int) -> None:
        with self.cond:
            self.inbox.pop(rid, None)

    def abandon(self, rid: int) -> None:
        """Drops ``rid``'s answers from now on and forgets it at its terminal one; a thread
        waiting for it raises :class:`Cancelled`."""
        with self.cond:
            queue = self.inbox.get(rid)
            if queue is None:
                return
            if any(not isinstance(message, p.Preview) for message in queue):
                del self.inbox[rid]
            else:
                queue.clear()
                self.abandoned.add(rid)
            self.cond.notify_all()

    def fail(self, failure: BaseException) -> None:
        with self.cond:
            if self.failure is None:
                self.failure = failure
            self.cond.notify_all()
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def next_answer(self, rid: int) -> p.Message:
        """The next message for ``rid``, reading the socket if no other thread is."""
        while True:
            with self.cond:
                while True:
                    queue = self.inbox.get(rid)
                    if queue is None or rid in self.abandoned:
                        raise Cancelled(rid)
                    if queue:
                        return queue.popleft()
                    if self.failure is not None:
                        # One exception per waiter: each raise adds to its traceback.
                        if isinstance(self.failure, ConnectionLost):
                            raise ConnectionLost(str(self.failure))
                        raise self.failure
                    if not self.reading:
                        self.reading = True
                        break
                    self.cond.wait()
            try:
                # A descriptor comes with the first byte of its frame (a shared-memory rendition).
                data, fds, _, _ = socket.recv_fds(self.sock, 1 << 20, 16, getattr(socket, "MSG_CMSG_CLOEXEC", 0))
                with self.cond:  # close() empties it from another thread
                    self.descriptors.extend(fds)
                frames = self.decoder.feed(data) if data else None
            except (OSError, p.MalformedFrame) as error:
                frames, data = None, b""
                self.fail(ConnectionLost(f"viewerd connection lost: {error}"))
            with self.cond:
                self.reading = False
                if frames is None:
                    if self.failure is None:
                        self.failure = ConnectionLost("viewerd closed the connection")
                else:
                    for frame in frames:
                        self._file(frame)
                    self._close_stray()
                self.cond.notify_all()

    def _close_stray(self) -> None:
        """Closes descriptors that came with frames not flagged for one. A descriptor comes with
        its frame's first byte, and such a frame starts its own send: only a frame begun and not
        yet whole may have one waiting (the newest)."""
        keep = 1 if self.decoder.buffered else 0
        while len(self.descriptors) > keep:
            os.close(self.descriptors.popleft())

    def _file(self, frame: p.Frame) -> None:
        fd = self.descriptors.popleft() if frame.carries_descriptor and self.descriptors else None
        try:
            message = p.decode(frame)
        except ValueError:
            message = None  # a newer server's message type: skipped by its length
        if isinstance(message, p.Rendition) and message.shared_bytes is not None:
            try:
                message.data = _map_shared(fd, message.shared_bytes,
                                           message.width * message.height * 4, self.decoder.max_body)
            except (OSError, ValueError) as error:
                message = p.Error(100, f"cannot map the shared-memory rendition: {error}")
            fd = None  # _map_shared closed it
        if fd is not None:
            os.close(fd)  # one nothing takes
        if message is None:
            return
        if frame.request_id == 0 and isinstance(message, p.Error) and 0 not in self.inbox:
            # About the connection, which the daemon closes: every request fails.
            self.failure = ViewerError.from_code(message.code, message.message)
            return
        if frame.request_id in self.abandoned:
            if not isinstance(message, p.Preview):
                self.abandoned.discard(frame.request_id)
                self.inbox.pop(frame.request_id, None)
            return
        queue = self.inbox.get(frame.request_id)
        if queue is not None:
            queue.append(message)

    def close(self) -> None:
        self.fail(ConnectionLost("closed by the client"))
        self.sock.close()
        with self.cond:
            while self.descriptors:
                os.close(self.descriptors.popleft())


#: F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE: the daemon's seals on a rendition.
_SEALS = 0x1 | 0x2 | 0x4 | 0x8


def _map_shared(fd: Optional[int], count: int, expected: int, limit: int) -> memoryview:
    """Maps the first ``count`` bytes of a shared-memory rendition's memfd read-only (populated) and closes
    the descriptor; the mapping goes with the last reference to the view. Refuses a descriptor
    missing, not sealed as the daemon seals it, or too short, and a ``count`` other than the
    rendition's ``expected`` size (width × height × 4) or over ``limit`` (``max_response_body``).

    CPython's ``mmap`` keeps a duplicate of the descriptor for the mapping's life; from Python
    3.13 ``trackfd=False`` spares it. Before 3.13 each live mapping holds one descriptor open,
    closed with it (``mmap.close`` or the last reference going)."""
    if fd is None:
        raise ValueError("a shared-memory rendition came without its descriptor")
    try:
        if count != expected or count > limit:
            raise ValueError(f"it claims {count} bytes for {expected} of pixels (limit {limit})")
        seals = fcntl.fcntl(fd, fcntl.F_GET_SEALS)
        if seals & _SEALS != _SEALS:
            raise ValueError(f"its descriptor is not sealed (seals 0x{seals:x})")
        if os.fstat(fd).st_size < count:
            raise ValueError(f"its descriptor holds fewer than {count} bytes")
        if count == 0:
            return memoryview(b"")
        # Populated: the pages are the daemon's, already in memory; mapping them all now spares
        # the first reader a fault per page.
        populate = getattr(mmap, "MAP_POPULATE", 0x8000)
        untracked = {"trackfd": False} if sys.version_info >= (3, 13) else {}
        return memoryview(mmap.mmap(fd, count, mmap.MAP_SHARED | populate, mmap.PROT_READ, **untracked))
    finally:
        os.close(fd)


class RenderRequest:
    """A RENDER on its way: its previews, its result, and the means to cancel it or change its
    priority. Obtained from :meth:`Client.start_render`."""

    def __init__(self, connection: _Connection, request_id: int) -> None:
        self._connection = connection
        self.request_id = request_id
        self._terminal: Optional[p.Message] = None

    def events(self) -> Iterator[Union[p.Preview, p.Result]]:
        """Yields each PREVIEW, then the RESULT; raises :class:`ViewerError` for an ERROR,
        :class:`Cancelled` when cancelled."""
        while self._terminal is None:
            message = self._connection.next_answer(self.request_id)
            if isinstance(message, p.Preview):
                yield message
            else:
                self._terminal = message
                self._connection.forget(self.request_id)
        if isinstance(self._terminal, p.Cancelled):
            raise Cancelled(self.request_id)
        yield expect(self._terminal, p.Result, self.request_id)

    def result(self, on_preview: Optional[Callable[[p.Preview], None]] = None) -> p.Result:
        """Waits for the RESULT (calling ``on_preview`` for each PREVIEW before it)."""
        for event in self.events():
            if isinstance(event, p.Result):
                return event
            if on_preview is not None:
                on_preview(event)
        raise AssertionError("unreachable")

    def cancel(self) -> None:
        """Sends CANCEL. The answer (CANCELLED, or a RESULT already on its way) still comes."""
        self._connection.send(p.encode(p.Cancel(), self.request_id))

    def abandon(self) -> None:
        """Sends CANCEL and drops whatever answer comes (a page swiped past that nobody will
        read): nothing of it stays in the client. A thread reading its events raises
        :class:`Cancelled`."""
        self.cancel()
        self._connection.abandon(self.request_id)

    def set_priority(self, priority: Union[p.Priority, int, str]) -> None:
        """Sends SET_PRIORITY; it is never answered."""
        self._connection.send(p.encode(p.SetPriority(_enum(p.Priority, priority, "priority")), self.request_id))


class LayoutRequest:
    """A LAYOUT on its way: its batches of items as they come, and the means to cancel it.
    Obtained from :meth:`Client.start_layout`."""

    def __init__(self, connection: _Connection, request_id: int) -> None:
        self._connection = connection
        self.request_id = request_id
        self.count: Optional[int] = None

    def batches(self) -> Iterator[p.LayoutItems]:
        """Yields each LAYOUT_ITEMS; ends at the ACK (``count`` is then the items answered);
        raises :class:`ViewerError` when the LAYOUT fails whole, :class:`Cancelled` after CANCEL."""
        while self.count is None:
            message = self._connection.next_answer(self.request_id)
            if isinstance(message, p.LayoutItems):
                yield message
                continue
            self._connection.forget(self.request_id)
            if isinstance(message, p.Cancelled):
                raise Cancelled(self.request_id)
            self.count = expect(message, p.Ack, self.request_id).count

    def items(self) -> Dict[int, p.LayoutItem]:
        """Every item by index, each its last (final) one, once the LAYOUT has ended."""
        final: Dict[int, p.LayoutItem] = {}
        for batch in self.batches():
            for item in batch.items:
                final[item.index] = item
        return final

    def cancel(self) -> None:
        """Sends CANCEL: the LAYOUT ends with CANCELLED (unless its ACK is already on its way)."""
        self._connection.send(p.encode(p.Cancel(), self.request_id))


class Cancelled(Exception):
    """The RENDER was cancelled (its terminal answer was CANCELLED)."""

    def __init__(self, request_id: int) -> None:
        super().__init__(f"request {request_id} was cancelled")
        self.request_id = request_id


class Client:
    """A blocking connection to viewerd; safe to share between threads.

    The socket is found as PROTOCOL.md says (``$VIEWERD_SOCKET``, ``$XDG_RUNTIME_DIR/viewerd``,
    ``/tmp/viewerd-<uid>``, then ``/run/viewerd/viewerd.sock``) and checked before anything is
    sent. With no daemon there, a request raises :class:`DaemonUnavailable` (naming the socket);
    if the daemon goes away, requests outstanding raise :class:`ConnectionLost` and the next
    request connects again. Every error about the daemon is a :class:`ViewerError`.

    >>> with viewerd.Client() as client:
    ...     result = client.render("/home/me/a.jpg", 256, 256)
    ...     open("thumb.jpg", "wb").write(result.data)
    """

    def __init__(self, socket_path: Optional[str] = None, client_name: str = "viewerd-python") -> None:
        self.socket_path = socket_path or default_socket()
        self.client_name = client_name
        self._lock = threading.Lock()
        self._connection: Optional[_Connection] = None

    def __enter__(self) -> "Client":
        self.connect()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def connect(self) -> p.Welcome:
        """Connects (if not connected) and returns the daemon's WELCOME."""
        return self._current().welcome

    @property
    def welcome(self) -> p.Welcome:
        return self._current().welcome

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    def _current(self) -> _Connection:
        with self._lock:
            if self._connection is None or self._connection.failure is not None:
                if self._connection is not None:
                    self._connection.sock.close()
                self._connection = _Connection(self.socket_path, self.client_name)
            return self._connection

    def _request(self, message: p.Message, fd: Optional[int] = None) -> p.Message:
        connection = self._current()
        rid = connection.register()
        try:
            connection.send(p.encode(message, rid, p.FLAG_DESCRIPTOR if fd is not None else 0), fd)
            answer = connection.next_answer(rid)
        finally:
            connection.forget(rid)
        raise_if_error(answer, rid)
        return answer

    # ------------------------------------------------------------ rendering

    def start_render(self, path: Optional[str] = None, width: int = 0, height: int = 0, *, fd: Optional[int] = None,
                     fit="fit", crop="centre", format="jpeg", quality: int = 0, background: int = 0xFFFFFF,
                     page: int = 0, upscale: bool = False, priority="normal", delivery="final",
                     allow_larger: bool = False, region: Optional[Tuple[int, int, int, int]] = None,
                     tile: Optional[p.TileAddress] = None, source_info: bool = False,
                     time: Optional[float] = None, shared_memory: bool = False, rotation: int = 0,
                     mirror: bool = False, colour="colour") -> RenderRequest:
        """Sends a RENDER of ``path``, or of the open file ``fd`` (passed to the daemon; ``path``
        then only names it), and returns at once. A relative ``path`` is resolved against the
        working directory, as viewerctl does (``os.getcwd()``, then ``..`` lexically).

        ``fit`` is ``"fit"``, ``"fill"`` or ``"stretch"`` (exactly the box); ``crop`` (fill only)
        ``"centre"``, ``"attention"`` or ``"entropy"``; ``format`` ``"jpeg"``, ``"webp"``,
        ``"png"``, ``"avif"``, ``"gif"`` or ``"raw"``; ``rotation`` degrees clockwise (0-359),
        ``mirror`` (left to right, before the rotation) and ``colour`` ``"colour"``, ``"gray"`` or
        ``"bitonal"``, applied after the resize (a daemon without the ``transforms`` capability
        ignores them);
        ``priority`` ``"visible"``, ``"high"``, ``"normal"``, ``"prefetch"`` or ``"background"``;
        ``delivery`` ``"final"``, ``"opportunistic"`` or ``"cache-only"`` (or the enums of
        :mod:`viewerd.protocol`): another value is a ValueError that lists these. ``time``: for a
        video, the frame shown that many seconds from its start (``viewerctl render --time``);
        None, a representative frame. With ``source_info``, the RESULT's ``source`` is the
        original's media info when the daemon knows it (else None: ask :meth:`info`), saving a
        round trip. With ``shared_memory`` and ``format="raw"``, the pixels come as a sealed memfd
        mapped read-only: the result's ``data`` is a read-only ``memoryview`` of the mapping (no
        copy through the socket), unmapped once no reference to it is left; a daemon without
        the ``shared-memory`` capability sends them inline, as ``bytes``.

        >>> frame = client.start_render("clip.mp4", 320, 180, time=12.5, format="webp").result()
        """
        spec = make_spec(width, height, fit, crop, format, quality, background, page, upscale,
                         time, region, tile, rotation, mirror, colour)
        message = make_render(path, fd, spec, priority, delivery, allow_larger, source_info, shared_memory)
        connection = self._current()
        rid = connection.register()
        flags = p.FLAG_DESCRIPTOR if fd is not None else 0
        connection.send(p.encode(message, rid, flags), fd)
        return RenderRequest(connection, rid)

    def render(self, path: Optional[str] = None, width: int = 0, height: int = 0, *,
               on_preview: Optional[Callable[[p.Preview], None]] = None, **options) -> p.Result:  # type: ignore[no-untyped-def]
        """Renders and waits: the RESULT, or :class:`ViewerError`; the options are
        :meth:`start_render`'s. With ``delivery="opportunistic"``, ``on_preview`` is called with
        each PREVIEW first."""
        return self.start_render(path, width, height, **options).result(on_preview)

    # ------------------------------------------------------------ the rest

    def prefetch(self, paths: List[str], width: int = 0, height: int = 0, *, priority="prefetch",
                 **spec) -> int:  # type: ignore[no-untyped-def]
        """Queues renders of ``paths`` (relative ones resolved as by :meth:`start_render`, whose
        spec options ``spec`` takes, ``time`` included); returns how many were queued. Nothing
        says when they finish: poll with ``delivery="cache-only"`` renders."""
        message = p.Prefetch([absolute(path) for path in paths], make_spec(width, height, **spec),
                             _enum(p.Priority, priority, "priority"))
        return expect(self._request(message), p.Ack, 0).count

    def stop_prefetch(self, paths: List[str], width: int = 0, height: int = 0, **spec) -> int:  # type: ignore[no-untyped-def]
        """Withdraws this connection's prefetches of ``paths`` with that spec; returns how many."""
        message = p.StopPrefetch([absolute(path) for path in paths], make_spec(width, height, **spec))
        return expect(self._request(message), p.Ack, 0).count

    def stop_prefetch_all(self) -> int:
        return expect(self._request(p.StopPrefetchAll()), p.Ack, 0).count

    def invalidate(self, path: str, recursive: bool = False) -> int:
        """Forgets the renditions (and failures) of ``path`` (a relative one resolved as by
        :meth:`start_render`), or of every file under it with ``recursive``; returns how many
        were removed."""
        return expect(self._request(p.Invalidate(absolute(path), recursive)), p.Ack, 0).count

    def trim(self, max_bytes: int) -> int:
        """Evicts until the cache holds at most ``max_bytes``; returns renditions evicted."""
        return expect(self._request(p.Trim(max_bytes)), p.Ack, 0).count

    def info(self, path: Optional[str] = None, *, fd: Optional[int] = None) -> p.InfoReply:
        """What the file at ``path`` (a relative one resolved as by :meth:`start_render`), or the
        open file ``fd``, is: kind, upright size, a video's duration, frames or pages, format
        (INFO). Read from its header once, then answered from the daemon's cache until the file
        changes."""
        if path is None and fd is None:
            raise ValueError("info needs a path or a descriptor")
        named = absolute(path) if fd is None and path is not None else path or ""
        return expect(self._request(p.Info(named), fd), p.InfoReply, 0)

    def start_layout(self, paths: Optional[List[str]] = None, *, folder: Optional[str] = None, order="name",
                     offset: int = 0, limit: int = 0) -> LayoutRequest:  # type: ignore[no-untyped-def]
        """Sends a LAYOUT (PROTOCOL.md): the media info of ``paths``, or of ``folder``'s files in
        ``order`` (``"name"`` or ``"modified"``, newest first) from ``offset``, at most ``limit``
        (0: the daemon's maximum, 10,000); returns at once. Stored info comes at once; files the
        daemon reads come first ``info_pending``, then again."""
        message = make_layout(paths, folder, order, offset, limit)
        connection = self._current()
        rid = connection.register()
        try:
            connection.send(p.encode(message, rid))
        except BaseException:
            connection.forget(rid)
            raise
        return LayoutRequest(connection, rid)

    def layout(self, paths: Optional[List[str]] = None, *, folder: Optional[str] = None, order="name",
               offset: int = 0, limit: int = 0) -> Dict[int, p.LayoutItem]:  # type: ignore[no-untyped-def]
        """Every item of a LAYOUT (see :meth:`start_layout`) by index, once each is final.

        >>> items = client.layout(folder="/home/me/Pictures", order="modified", limit=500)
        >>> items[0].info.width, items[0].info.placeholder_image()
        """
        return self.start_layout(paths, folder=folder, order=order, offset=offset, limit=limit).items()

    def stats(self) -> Dict[str, int]:
        """The daemon's counters by name (unknown names included; look up what you need)."""
        return expect(self._request(p.Stats()), p.StatsReply, 0).counters

    def ping(self) -> float:
        """Round trip in seconds."""
        start = time.monotonic()
        expect(self._request(p.Ping()), p.Pong, 0)
        return time.monotonic() - start
