"""Errors a viewerd client raises: the daemon's ERROR answers, and a lost connection."""
from __future__ import annotations

from typing import Dict

#: Every error code of protocol version 1 and its stable name (PROTOCOL.md, "Error codes").
ERROR_NAMES: Dict[int, str] = {
    100: "malformed-frame",
    101: "unsupported-version",
    102: "unknown-message",
    103: "invalid-argument",
    104: "handshake-required",
    200: "not-found",
    201: "permission-denied",
    202: "not-regular-file",
    203: "unreadable",
    300: "unsupported-format",
    301: "corrupt-image",
    302: "too-large",
    303: "decoder-crashed",
    304: "timeout",
    400: "busy",
    401: "not-cached",
    402: "shutting-down",
    500: "internal-error",
    501: "store-error",
}

_RETRYABLE = frozenset({203, 304, 400, 401, 402, 500, 501})


class ViewerError(Exception):
    """An ERROR answer from the daemon: a stable numeric ``code``, its ``name`` and the
    daemon's human ``message``.

    >>> try:
    ...     client.render("/missing.jpg", 256)
    ... except ViewerError as error:
    ...     print(error.code, error.name, error.retryable)
    200 not-found False
    """

    def __init__(self, code: int, name: str, message: str) -> None:
        super().__init__(f"{name} ({code}): {message}" if message else f"{name} ({code})")
        self.code = code
        self.name = name
        self.message = message

    @classmethod
    def from_code(cls, code: int, message: str = "") -> "ViewerError":
        """The error for ``code``; a code this version does not know is named by its hundred."""
        return cls(code, ERROR_NAMES.get(code, f"error-{code}"), message)

    @property
    def retryable(self) -> bool:
        """Whether the same request may succeed later without the file changing."""
        if self.code in ERROR_NAMES:
            return self.code in _RETRYABLE
        # Unknown codes are judged by their hundred: the daemon's state and its faults pass.
        return self.code // 100 in (4, 5)


class ConnectionLost(ConnectionError):
    """The daemon closed the connection (it stopped or restarted) with this request outstanding.

    The request may be sent again: the client reconnects on its next request."""

    retryable = True


class UntrustedSocket(PermissionError):
    """The socket's directory or the process listening on it is not trusted
    (PROTOCOL.md, "Before trusting a socket"); nothing was sent."""
