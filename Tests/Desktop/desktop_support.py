"""Support of the desktop conformance tests: a real viewerd and viewerd-thumbnailer on the
session bus (make test runs these tests under dbus-run-session), the Thumbnailer1 client
(clients/desktop/thumbnailer1.py, GDBus), images, and a reader of the cache's PNGs."""
from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
import tempfile
import time
import unittest
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "desktop"))
sys.path.insert(0, os.path.join(REPO, "clients", "python", "tests"))  # support: Daemon, make_jpeg
sys.path.insert(0, os.path.join(REPO, "clients", "python"))           # the viewerd package (STATS)

import support  # noqa: E402
from support import Daemon, make_jpeg  # noqa: E402,F401
import thumbnailer1  # noqa: E402
from thumbnailer1 import Thumbnailer, uri  # noqa: E402,F401
import viewerd  # noqa: E402

NAME = thumbnailer1.NAME


def build_dir() -> str:
    return os.environ.get("VIEWERD_BUILD_DIR") or os.path.join(REPO, ".build", "debug")


def front_executable() -> str:
    path = os.path.join(build_dir(), "viewerd-thumbnailer")
    if not os.access(path, os.X_OK):
        if os.environ.get("VIEWERD_BUILD_DIR"):  # make test built it: its absence is a failure
            raise AssertionError(f"{path} is missing")
        raise unittest.SkipTest("no viewerd-thumbnailer build: run swift build")
    return path


def require_session_bus() -> None:
    """Skips (with the reason printed) where no bus can be had; make test runs under one."""
    if not os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        raise unittest.SkipTest("no session bus: run under dbus-run-session (make test does)")


def name_owner_pid(client: Thumbnailer, name: str = NAME):
    try:
        return client.call("GetConnectionUnixProcessID", "(s)", (name,), "(u)", name="org.freedesktop.DBus",
                           path="/org/freedesktop/DBus")[0]
    except Exception:  # noqa: BLE001 (not owned)
        return None


class Front:
    """viewerd-thumbnailer on a bus (the session bus unless `address`), writing `cache`."""

    def __init__(self, socket_path: str, cache: str, address: str = None, extra=(), environment=None) -> None:
        self.cache = cache
        self.log = cache.rstrip("/") + "-front.log"
        os.makedirs(os.path.dirname(self.log), exist_ok=True)
        command = [front_executable(), "--socket", socket_path, "--cache", cache, *extra]
        if address:
            command += ["--bus", address]
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                            env=dict(os.environ, **(environment or {})))
        probe = Thumbnailer(address)
        try:
            deadline = time.monotonic() + 20
            while name_owner_pid(probe) != self.process.pid:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.process.kill()
                    self.process.wait()
                    raise RuntimeError(f"viewerd-thumbnailer did not take the bus names: {self.read_log()}")
                time.sleep(0.05)
        finally:
            probe.close()

    def stop(self, timeout: float = 20) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    read_log = Daemon.read_log  # the tail of `self.log`


def make_png(path: str, width: int, height: int, alpha: bool = False) -> str:
    source = f"{path}.v"
    subprocess.run(["vips", "gaussnoise", source, str(width), str(height)], check=True)
    if alpha:
        subprocess.run(["vips", "bandjoin_const", source, source + "a.v", "128"], check=True)
        os.replace(source + "a.v", source)
    subprocess.run(["vips", "pngsave", source, path], check=True)
    os.unlink(source)
    return path


class PNG:
    """What the standard asks of a thumbnail file: its header and its text keys."""

    def __init__(self, path: str) -> None:
        with open(path, "rb") as f:
            data = f.read()
        if data[:8] != b"\x89PNG\r\n\x1a\n":
            raise ValueError(f"{path}: not a PNG")
        self.keys, self.chunks = {}, []
        offset = 8
        while offset + 12 <= len(data):
            length, kind = struct.unpack(">I4s", data[offset:offset + 8])
            body = data[offset + 8:offset + 8 + length]
            self.chunks.append(kind.decode("latin-1"))
            if kind == b"IHDR":
                self.width, self.height, self.bit_depth, self.color_type = struct.unpack(">IIBB", body[:10])
            elif kind == b"tEXt":
                key, value = body.split(b"\0", 1)
                self.keys.setdefault(key.decode("latin-1"), value.decode("latin-1"))
            elif kind == b"zTXt":
                key, rest = body.split(b"\0", 1)
                self.keys.setdefault(key.decode("latin-1"), zlib.decompress(rest[1:]).decode("latin-1"))
            offset += 12 + length
        self.complete = self.chunks[-1:] == ["IEND"]


def md5_name(file_uri: str) -> str:
    import hashlib
    return hashlib.md5(file_uri.encode()).hexdigest() + ".png"


class ConformanceCase(unittest.TestCase):
    """A viewerd and a viewerd-thumbnailer for the class, on the session bus."""

    @classmethod
    def setUpClass(cls) -> None:
        require_session_bus()
        front_executable()
        cls.daemon = Daemon().start()
        cls.root = cls.daemon.root
        cls.cache = os.path.join(cls.root, "xdg-cache", "thumbnails")
        cls.images = os.path.join(cls.root, "photos")
        os.makedirs(cls.images)
        try:
            cls.front = Front(cls.daemon.socket, cls.cache, extra=cls.front_arguments, environment=cls.front_environment())
        except BaseException:
            cls.daemon.cleanup()  # tearDownClass does not run when setUpClass fails
            raise

    front_arguments = ()

    @classmethod
    def front_environment(cls):
        """What the class adds to viewerd-thumbnailer's environment (after the daemon started):
        by default no desktop thumbnailer (the machine's own would make the tests its own)."""
        empty = os.path.join(cls.root, "no-data")
        return {"XDG_DATA_DIRS": empty, "XDG_DATA_HOME": empty}

    @classmethod
    def tearDownClass(cls) -> None:
        cls.front.stop()
        cls.daemon.cleanup()

    def setUp(self) -> None:
        self.client = Thumbnailer()
        self.addCleanup(self.client.close)

    def photo(self, name: str, width: int = 640, height: int = 480) -> str:
        path = os.path.join(self.images, name)
        if not os.path.exists(path):
            (make_png if name.endswith(".png") else make_jpeg)(path, width, height)
        return path

    def thumbnail_path(self, path_or_uri: str, flavor: str = "large") -> str:
        file_uri = path_or_uri if "://" in path_or_uri else uri(path_or_uri)
        return os.path.join(self.cache, flavor, md5_name(file_uri))

    def renders(self) -> int:
        with viewerd.Client(self.daemon.socket) as client:
            return client.stats()["renders"]

    def version(self) -> str:
        with viewerd.Client(self.daemon.socket) as client:
            return client.welcome.server_version

    def assertEveryFileAnswered(self, outcome, uris) -> None:
        """Nothing lost: each URI answered once, Ready or Error, and Finished sent."""
        self.assertTrue(outcome["finished"], outcome)
        answered = outcome["ready"] + [e["uri"] for e in outcome["errors"]]
        self.assertEqual(sorted(answered), sorted(uris), outcome)
