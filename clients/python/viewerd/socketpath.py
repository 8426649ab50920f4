"""Where the daemon's socket is, and whether to trust it (PROTOCOL.md, "Where the socket is"
and "Before trusting a socket")."""
from __future__ import annotations

import os
import socket
import stat
import struct
from typing import Mapping, Optional, Set

from .errors import DaemonUnavailable, UntrustedSocket

SYSTEM_SOCKET = "/run/viewerd/viewerd.sock"


def user_socket(environ: Optional[Mapping[str, str]] = None, uid: Optional[int] = None) -> str:
    """The per-user daemon's socket: ``$VIEWERD_SOCKET``, else under an absolute
    ``$XDG_RUNTIME_DIR``, else ``/tmp/viewerd-<uid>``."""
    env = os.environ if environ is None else environ
    if env.get("VIEWERD_SOCKET"):
        return env["VIEWERD_SOCKET"]
    runtime = env.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/"):
        return runtime + "/viewerd/viewerd.sock"
    return f"/tmp/viewerd-{os.getuid() if uid is None else uid}/viewerd.sock"


def default_socket(environ: Optional[Mapping[str, str]] = None) -> str:
    """The socket a client uses when told none, as ``viewerctl`` chooses it: the per-user
    socket, or the system service's ``/run/viewerd/viewerd.sock`` when ``VIEWERD_SOCKET`` is
    unset, no per-user socket exists and the system one does."""
    env = os.environ if environ is None else environ
    user = user_socket(env)
    if "VIEWERD_SOCKET" not in env and not os.path.exists(user) and os.path.exists(SYSTEM_SOCKET):
        return SYSTEM_SOCKET
    return user


def trusted_uids(environ: Optional[Mapping[str, str]] = None) -> Set[int]:
    """This user, root, the user ``viewerd`` if it exists, and ``$VIEWERD_SERVICE_USER``."""
    env = os.environ if environ is None else environ
    uids = {os.getuid(), 0}
    names = ["viewerd"]
    named = env.get("VIEWERD_SERVICE_USER", "")
    if named.isdigit():
        uids.add(int(named))
    elif named:
        names.append(named)
    try:
        import pwd
        for name in names:
            try:
                uids.add(pwd.getpwnam(name).pw_uid)
            except KeyError:
                pass
    except ImportError:
        pass
    return uids


def check_directory(path: str, trusted: Set[int]) -> None:
    """Raises :class:`UntrustedSocket` unless the socket's directory is safe to trust. A
    directory that cannot be looked at (missing, or not this user's to search) is left to
    ``connect``, whose error says why the daemon is unavailable."""
    directory = os.path.dirname(os.path.abspath(path)) or "/"
    try:
        st = os.lstat(directory)
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid not in trusted:
                raise UntrustedSocket(f"refusing to talk to {path}: {directory} is a symlink owned by uid {st.st_uid}")
            st = os.stat(directory)
    except UntrustedSocket:
        raise
    except OSError:
        return  # no such directory, or not ours to look at: connect says which
    if st.st_uid not in trusted:
        raise UntrustedSocket(f"refusing to talk to {path}: {directory} is owned by uid {st.st_uid}")
    if st.st_mode & 0o022 and not (st.st_uid == 0 and st.st_mode & stat.S_ISVTX):
        raise UntrustedSocket(f"refusing to talk to {path}: {directory} is writable by group or others")


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process that listens on the other end (``SO_PEERCRED``)."""
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return uid


def connect_trusted(path: str, blocking: bool = True) -> socket.socket:
    """Connects to ``path`` after checking its directory, and returns the socket only if a
    trusted user listens there. Nothing is written to the socket. Raises
    :class:`DaemonUnavailable` when nothing answers there, :class:`UntrustedSocket` when the
    directory or the listener is not trusted."""
    trusted = trusted_uids()
    check_directory(path, trusted)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError as error:
            raise DaemonUnavailable.from_os_error(path, error) from error
        uid = peer_uid(sock)
        if uid not in trusted:
            raise UntrustedSocket(f"refusing to talk to {path}: it is served by uid {uid}")
    except BaseException:
        sock.close()
        raise
    sock.setblocking(blocking)
    return sock
