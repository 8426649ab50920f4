"""Errors a viewerd client raises, all :class:`ViewerError`: the daemon's ERROR answers, and the
client's own (no daemon, a lost connection, an untrusted socket)."""
from __future__ import annotations

import os
from typing import Dict, Optional

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
    """What a viewerd client raises about the daemon. For an ERROR answer: the protocol's stable
    numeric ``code``, its ``name`` and the daemon's human ``message``. The client's own errors
    are subclasses with ``code`` None and a name of their own: :class:`DaemonUnavailable`
    (``daemon-unavailable``), :class:`ConnectionLost` (``connection-lost``) and
    :class:`UntrustedSocket` (``untrusted-socket``).

    >>> try:
    ...     client.render("/missing.jpg", 256)
    ... except ViewerError as error:
    ...     print(error.code, error.name, error.retryable)
    200 not-found False
    """

    code: Optional[int]

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
        assert self.code is not None
        if self.code in ERROR_NAMES:
            return self.code in _RETRYABLE
        # Unknown codes are judged by their hundred: the daemon's state and its faults pass.
        return self.code // 100 in (4, 5)


class _ClientError(ViewerError):
    """An error of the client's own, not an ERROR answer: no code, a fixed name."""

    name = ""
    retryable = False  # type: ignore[assignment]

    def __init__(self, message: str) -> None:
        Exception.__init__(self, message)
        self.code = None
        self.message = message


class DaemonUnavailable(_ClientError, ConnectionError):
    """No daemon answers at ``socket_path``: nothing listens there (``errno`` ENOENT,
    ECONNREFUSED), this user may not reach it (EACCES), or it closed the connection before its
    WELCOME. Nothing was sent; the next request tries again.

    >>> try:
    ...     viewerd.Client().ping()
    ... except viewerd.DaemonUnavailable as error:
    ...     print(error)
    viewerd is not available at /run/user/1000/viewerd/viewerd.sock: No such file or directory
    """

    name = "daemon-unavailable"
    retryable = True

    def __init__(self, socket_path: str, reason: str, errno: Optional[int] = None) -> None:
        super().__init__(f"viewerd is not available at {socket_path}: {reason}")
        self.socket_path = socket_path
        self.reason = reason
        self.errno = errno
        self.strerror = reason
        self.filename = socket_path

    @classmethod
    def from_os_error(cls, socket_path: str, error: OSError) -> "DaemonUnavailable":
        if error.errno is not None:
            return cls(socket_path, os.strerror(error.errno), error.errno)
        return cls(socket_path, str(error) or type(error).__name__)

    def __str__(self) -> str:
        return self.message


class ConnectionLost(_ClientError, ConnectionError):
    """The daemon closed the connection (it stopped or restarted) with this request outstanding.

    The request may be sent again: the client reconnects on its next request."""

    name = "connection-lost"
    retryable = True

    def __str__(self) -> str:
        return self.message


class UntrustedSocket(_ClientError, PermissionError):
    """The socket's directory or the process listening on it is not trusted
    (PROTOCOL.md, "Before trusting a socket"); nothing was sent."""

    name = "untrusted-socket"

    def __str__(self) -> str:
        return self.message
