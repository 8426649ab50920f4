"""A full-screen pager's requests, as the Swift client's ``Pager``."""
from __future__ import annotations

import threading
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from . import protocol as p
from .client import Client, RenderRequest


class Pager:
    """The requests of a full-screen pager, driven by the index of the page on screen: that page
    at ``visible`` with ``opportunistic`` delivery (a PREVIEW at once, then the sharp RESULT), its
    neighbours up to ``reach`` pages either side rendered ahead at lower priority (``high`` next
    door, ``normal`` beyond), and the pages swiped past cancelled (CANCEL), as a grid's reused
    cell cancels its old request. A PREVIEW may be smaller than the RESULT (the grid's stored
    thumbnail, an EXIF thumbnail): take its size from it and scale it to the screen.

    Safe to share between threads: ``show`` only sends frames; ``events(index)`` reads a page's.

    >>> pager = Pager(client, photos, 2560, 1440)
    >>> pager.show(0)                  # page 0, and pages 1 and 2 ahead
    >>> for rendition in pager.events(0):
    ...     draw(rendition)            # a Preview, then the Result
    >>> pager.show(5)                  # a fling: 0, 1 and 2 cancelled; 3 to 7 asked
    """

    def __init__(self, client: Client, paths: Sequence[str], width: int, height: int, *, reach: int = 2,
                 **spec) -> None:  # type: ignore[no-untyped-def]
        if reach < 0:
            raise ValueError(f"a pager cannot reach {reach} pages ahead")
        self.client, self.paths, self.reach = client, list(paths), reach
        self._box, self._spec = (width, height), spec
        self._lock = threading.Lock()
        self._current: Optional[int] = None
        self._pending: Dict[int, Tuple[RenderRequest, str]] = {}
        #: Pages within reach read to their end: not asked again until they leave and return.
        self._finished: Set[int] = set()

    def priority(self, page: int, current: int) -> Optional[str]:
        """The priority ``page`` is asked at while ``current`` is on screen; None out of reach."""
        distance = abs(page - current)
        if distance == 0:
            return "visible"
        if distance > self.reach:
            return None
        return "high" if distance == 1 else "normal"

    def show(self, index: int) -> None:
        """Page ``index`` is on screen: it and its neighbours within ``reach`` are asked (or raised
        or lowered), pages ahead in the swipe's direction first; the pages out of reach still
        pending are cancelled, and their answers dropped."""
        if not 0 <= index < len(self.paths):
            return
        with self._lock:
            forward = index >= (self._current if self._current is not None else index)
            self._current = index
            order: List[int] = [index]
            for step in range(1, self.reach + 1):
                order += [index + step, index - step] if forward else [index - step, index + step]
            for page in order:
                wanted = self.priority(page, index) if 0 <= page < len(self.paths) else None
                if wanted is None or page in self._finished:
                    continue
                if page in self._pending:
                    request, priority = self._pending[page]
                    if priority != wanted:
                        request.set_priority(wanted)
                        self._pending[page] = (request, wanted)
                    continue
                request = self.client.start_render(self.paths[page], *self._box, priority=wanted,
                                                   delivery="opportunistic", **self._spec)
                self._pending[page] = (request, wanted)
            for page in [page for page in self._pending if self.priority(page, index) is None]:
                self._pending.pop(page)[0].abandon()
            self._finished = {page for page in self._finished if self.priority(page, index) is not None}

    def events(self, index: int) -> Iterator[Union[p.Preview, p.Result]]:
        """The renditions of page ``index`` (which ``show`` asked for): its PREVIEW, if any, then
        its RESULT; raises :class:`viewerd.Cancelled` if it is swiped past meanwhile, and the
        daemon's :class:`viewerd.ViewerError` for it. A page asked once is not asked again while
        it stays within reach: read its events once."""
        with self._lock:
            entry = self._pending.get(index)
        if entry is None:
            raise KeyError(f"page {index} is not asked: show() a page within {self.reach} of it first")
        request = entry[0]
        yield from request.events()
        with self._lock:
            if self._pending.get(index, (None,))[0] is request:
                del self._pending[index]
                self._finished.add(index)

    def close(self) -> None:
        """Cancels every page still pending."""
        with self._lock:
            pending, self._pending = self._pending, {}
        for request, _ in pending.values():
            request.abandon()
