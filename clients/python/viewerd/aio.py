"""The asyncio client: one reader task per connection files answers by request id."""
from __future__ import annotations

import asyncio
import socket
import time
from typing import AsyncIterator, Callable, Dict, List, Optional, Tuple, Union

from . import protocol as p
from ._common import make_layout, IdCounter, expect, absolute, make_render, make_spec, raise_if_error, _enum
from .client import Cancelled
from .errors import ConnectionLost, DaemonUnavailable, ViewerError
from .socketpath import connect_trusted, default_socket


class _AsyncConnection:
    """A connected, greeted socket; confined to its event loop."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.loop = asyncio.get_running_loop()
        self.decoder = p.FrameDecoder()
        self.queues: Dict[int, "asyncio.Queue[p.Message]"] = {0: asyncio.Queue()}
        self.write_lock = asyncio.Lock()
        self.failure: Optional[BaseException] = None
        self.ids = IdCounter()
        self.reader: Optional["asyncio.Task[None]"] = None
        self.welcome: Optional[p.Welcome] = None

    @classmethod
    async def open(cls, path: str, client_name: str) -> "_AsyncConnection":
        # connect() on a Unix socket does not block for long; the checks need the blocking form.
        sock = await asyncio.get_running_loop().run_in_executor(None, connect_trusted, path, False)
        connection = cls(sock)
        connection.reader = asyncio.ensure_future(connection._read())
        try:
            await connection.send(p.encode(p.Hello(client_name=client_name), 0))
            welcome = expect(await connection.next_answer(0), p.Welcome, 0)
        except ConnectionLost as error:
            await connection.close()
            raise DaemonUnavailable(path, "it closed the connection before its WELCOME") from error
        except BaseException:
            await connection.close()
            raise
        connection.welcome = welcome
        connection.decoder.max_body = welcome.max_response_body
        return connection

    async def send(self, frame: bytes, fd: Optional[int] = None) -> None:
        if self.failure is not None:
            raise ConnectionLost(str(self.failure))
        try:
            async with self.write_lock:
                if fd is not None:
                    await self._send_fd(frame[:1], fd)
                    frame = frame[1:]
                await self.loop.sock_sendall(self.sock, frame)
        except OSError as error:
            self._fail(ConnectionLost(f"viewerd connection lost: {error}"))
            raise ConnectionLost(f"viewerd connection lost: {error}") from error

    async def _send_fd(self, first: bytes, fd: int) -> None:
        while True:
            try:
                socket.send_fds(self.sock, [first], [fd])
                return
            except BlockingIOError:
                ready = self.loop.create_future()
                self.loop.add_writer(self.sock.fileno(), ready.set_result, None)
                try:
                    await ready
                finally:
                    self.loop.remove_writer(self.sock.fileno())

    def register(self) -> int:
        if self.failure is not None:
            raise ConnectionLost(str(self.failure))
        rid = self.ids.take()
        while rid in self.queues:
            rid = self.ids.take()
        self.queues[rid] = asyncio.Queue()
        return rid

    async def next_answer(self, rid: int) -> p.Message:
        queue = self.queues[rid]
        if queue.empty() and self.failure is not None:
            raise self._failure_error()
        message = await queue.get()
        if message is None:  # the reader's mark: the connection ended
            queue.put_nowait(None)  # type: ignore[arg-type]
            raise self._failure_error()
        return message

    def forget(self, rid: int) -> None:
        self.queues.pop(rid, None)

    def _failure_error(self) -> BaseException:
        if isinstance(self.failure, ConnectionLost) or not isinstance(self.failure, ViewerError):
            return ConnectionLost(str(self.failure))
        return self.failure

    def _fail(self, failure: BaseException) -> None:
        if self.failure is None:
            self.failure = failure
        for queue in self.queues.values():
            queue.put_nowait(None)  # type: ignore[arg-type]

    async def _read(self) -> None:
        try:
            while True:
                data = await self.loop.sock_recv(self.sock, 1 << 20)
                if not data:
                    self._fail(ConnectionLost("viewerd closed the connection"))
                    return
                for frame in self.decoder.feed(data):
                    try:
                        message = p.decode(frame)
                    except ValueError:
                        continue
                    if frame.request_id == 0 and isinstance(message, p.Error) and self.welcome is not None:
                        self._fail(ViewerError.from_code(message.code, message.message))
                        return
                    queue = self.queues.get(frame.request_id)
                    if queue is not None:
                        queue.put_nowait(message)
        except (OSError, p.MalformedFrame) as error:
            self._fail(ConnectionLost(f"viewerd connection lost: {error}"))
        except asyncio.CancelledError:
            self._fail(ConnectionLost("closed by the client"))
            raise

    async def close(self) -> None:
        if self.reader is not None:
            self.reader.cancel()
            try:
                await self.reader
            except asyncio.CancelledError:
                pass
        self._fail(ConnectionLost("closed by the client"))
        self.sock.close()


class AsyncRenderRequest:
    """A RENDER on its way, for asyncio: ``async for event in request.events()`` or
    ``await request.result()``."""

    def __init__(self, connection: _AsyncConnection, request_id: int) -> None:
        self._connection = connection
        self.request_id = request_id
        self._terminal: Optional[p.Message] = None

    async def events(self) -> AsyncIterator[Union[p.Preview, p.Result]]:
        """Each PREVIEW, then the RESULT (or raises :class:`ViewerError` / :class:`Cancelled`)."""
        while self._terminal is None:
            message = await self._connection.next_answer(self.request_id)
            if isinstance(message, p.Preview):
                yield message
            else:
                self._terminal = message
                self._connection.forget(self.request_id)
        if isinstance(self._terminal, p.Cancelled):
            raise Cancelled(self.request_id)
        yield expect(self._terminal, p.Result, self.request_id)

    async def result(self, on_preview: Optional[Callable[[p.Preview], None]] = None) -> p.Result:
        async for event in self.events():
            if isinstance(event, p.Result):
                return event
            if on_preview is not None:
                on_preview(event)
        raise AssertionError("unreachable")

    async def cancel(self) -> None:
        await self._connection.send(p.encode(p.Cancel(), self.request_id))

    async def set_priority(self, priority: Union[p.Priority, int, str]) -> None:
        await self._connection.send(p.encode(p.SetPriority(_enum(p.Priority, priority, "priority")), self.request_id))


class AsyncLayoutRequest:
    """A LAYOUT on its way, for asyncio: ``async for batch in request.batches()``."""

    def __init__(self, connection: _AsyncConnection, request_id: int) -> None:
        self._connection = connection
        self.request_id = request_id
        self.count: Optional[int] = None

    async def batches(self) -> AsyncIterator[p.LayoutItems]:
        """Each LAYOUT_ITEMS, until the ACK (see :meth:`viewerd.LayoutRequest.batches`)."""
        while self.count is None:
            message = await self._connection.next_answer(self.request_id)
            if isinstance(message, p.LayoutItems):
                yield message
                continue
            self._connection.forget(self.request_id)
            if isinstance(message, p.Cancelled):
                raise Cancelled(self.request_id)
            self.count = expect(message, p.Ack, self.request_id).count

    async def items(self) -> Dict[int, p.LayoutItem]:
        """Every item by index, each its last one, once the LAYOUT has ended."""
        final: Dict[int, p.LayoutItem] = {}
        async for batch in self.batches():
            for item in batch.items:
                final[item.index] = item
        return final

    async def cancel(self) -> None:
        await self._connection.send(p.encode(p.Cancel(), self.request_id))


class AsyncClient:
    """An asyncio connection to viewerd, with the methods of :class:`viewerd.Client` as
    coroutines. Use it from one event loop.

    >>> async with viewerd.AsyncClient() as client:
    ...     thumb = await client.render("/home/me/a.jpg", 256, 256)
    """

    def __init__(self, socket_path: Optional[str] = None, client_name: str = "viewerd-python") -> None:
        self.socket_path = socket_path or default_socket()
        self.client_name = client_name
        self._connection: Optional[_AsyncConnection] = None
        self._connecting: Optional[asyncio.Lock] = None

    async def __aenter__(self) -> "AsyncClient":
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> p.Welcome:
        connection = await self._current()
        assert connection.welcome is not None
        return connection.welcome

    async def close(self) -> None:
        if self._connection is not None:
            await self._connection.close()
            self._connection = None

    async def _current(self) -> _AsyncConnection:
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._connection is None or self._connection.failure is not None:
                if self._connection is not None:
                    await self._connection.close()
                self._connection = await _AsyncConnection.open(self.socket_path, self.client_name)
            return self._connection

    async def _request(self, message: p.Message, fd: Optional[int] = None) -> p.Message:
        connection = await self._current()
        rid = connection.register()
        try:
            await connection.send(p.encode(message, rid, p.FLAG_DESCRIPTOR if fd is not None else 0), fd)
            answer = await connection.next_answer(rid)
        finally:
            connection.forget(rid)
        raise_if_error(answer, rid)
        return answer

    async def start_render(self, path: Optional[str] = None, width: int = 0, height: int = 0, *,
                           fd: Optional[int] = None, fit="fit", crop="centre", format="jpeg", quality: int = 0,
                           background: int = 0xFFFFFF, page: int = 0, upscale: bool = False, priority="normal",
                           delivery="final", allow_larger: bool = False, region: Optional[Tuple[int, int, int, int]] = None,
                           tile: Optional[p.TileAddress] = None, source_info: bool = False,
                           time: Optional[float] = None, rotation: int = 0, mirror: bool = False,
                           colour="colour") -> AsyncRenderRequest:
        """Sends a RENDER and returns at once; the options, the values they take and the
        resolving of a relative ``path`` are :meth:`viewerd.Client.start_render`'s."""
        spec = make_spec(width, height, fit, crop, format, quality, background, page, upscale,
                         time, region, tile, rotation, mirror, colour)
        message = make_render(path, fd, spec, priority, delivery, allow_larger, source_info)
        connection = await self._current()
        rid = connection.register()
        await connection.send(p.encode(message, rid, p.FLAG_DESCRIPTOR if fd is not None else 0), fd)
        return AsyncRenderRequest(connection, rid)

    async def render(self, path: Optional[str] = None, width: int = 0, height: int = 0, *,
                     on_preview: Optional[Callable[[p.Preview], None]] = None, **options) -> p.Result:  # type: ignore[no-untyped-def]
        request = await self.start_render(path, width, height, **options)
        return await request.result(on_preview)

    async def prefetch(self, paths: List[str], width: int = 0, height: int = 0, *, priority="prefetch",
                       **spec) -> int:  # type: ignore[no-untyped-def]
        message = p.Prefetch([absolute(path) for path in paths], make_spec(width, height, **spec),
                             _enum(p.Priority, priority, "priority"))
        return expect(await self._request(message), p.Ack, 0).count

    async def stop_prefetch(self, paths: List[str], width: int = 0, height: int = 0, **spec) -> int:  # type: ignore[no-untyped-def]
        message = p.StopPrefetch([absolute(path) for path in paths], make_spec(width, height, **spec))
        return expect(await self._request(message), p.Ack, 0).count

    async def stop_prefetch_all(self) -> int:
        return expect(await self._request(p.StopPrefetchAll()), p.Ack, 0).count

    async def invalidate(self, path: str, recursive: bool = False) -> int:
        return expect(await self._request(p.Invalidate(absolute(path), recursive)), p.Ack, 0).count

    async def trim(self, max_bytes: int) -> int:
        return expect(await self._request(p.Trim(max_bytes)), p.Ack, 0).count

    async def info(self, path: Optional[str] = None, *, fd: Optional[int] = None) -> p.InfoReply:
        """What the file at ``path`` (a relative one resolved as by
        :meth:`viewerd.Client.start_render`), or the open file ``fd``, is: kind, upright size,
        duration, frames, format (see :meth:`viewerd.Client.info`)."""
        if path is None and fd is None:
            raise ValueError("info needs a path or a descriptor")
        named = absolute(path) if fd is None and path is not None else path or ""
        return expect(await self._request(p.Info(named), fd), p.InfoReply, 0)

    async def start_layout(self, paths: Optional[List[str]] = None, *, folder: Optional[str] = None, order="name",
                           offset: int = 0, limit: int = 0) -> AsyncLayoutRequest:  # type: ignore[no-untyped-def]
        """Sends a LAYOUT (see :meth:`viewerd.Client.start_layout`); returns at once."""
        message = make_layout(paths, folder, order, offset, limit)
        connection = await self._current()
        rid = connection.register()
        try:
            await connection.send(p.encode(message, rid))
        except BaseException:
            connection.forget(rid)
            raise
        return AsyncLayoutRequest(connection, rid)

    async def layout(self, paths: Optional[List[str]] = None, *, folder: Optional[str] = None, order="name",
                     offset: int = 0, limit: int = 0) -> Dict[int, p.LayoutItem]:  # type: ignore[no-untyped-def]
        """Every item of a LAYOUT by index, once each is final."""
        request = await self.start_layout(paths, folder=folder, order=order, offset=offset, limit=limit)
        return await request.items()

    async def stats(self) -> Dict[str, int]:
        return expect(await self._request(p.Stats()), p.StatsReply, 0).counters

    async def ping(self) -> float:
        start = time.monotonic()
        expect(await self._request(p.Ping()), p.Pong, 0)
        return time.monotonic() - start
