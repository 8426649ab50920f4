"""Test support: the package on sys.path, a real viewerd on a temporary socket, images."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE_ROOT = os.path.dirname(HERE)
REPO = os.path.dirname(os.path.dirname(PACKAGE_ROOT))
sys.path.insert(0, PACKAGE_ROOT)


def daemon_executable(name: str = "viewerd") -> Optional[str]:
    """``$VIEWERD_BUILD_DIR/viewerd``, else the repository's ``.build/debug/viewerd`` (``name``:
    ``viewerd-testing``, the build with the test hooks: a file named ``viewerd-test-hang.*`` hangs
    its worker until ``--job-timeout``)."""
    build = os.environ.get("VIEWERD_BUILD_DIR") or os.path.join(REPO, ".build", "debug")
    path = os.path.join(build, name)
    return path if os.access(path, os.X_OK) else None


class Daemon:
    """A viewerd started for a test on its own socket and cache directory."""

    def __init__(self, root: Optional[str] = None, name: str = "viewerd", arguments: Sequence[str] = ()) -> None:
        executable = daemon_executable(name)
        if executable is None:
            raise unittest.SkipTest("no viewerd build: set VIEWERD_BUILD_DIR or run swift build")
        self.executable = executable
        self.root = root or tempfile.mkdtemp(prefix="viewerd-py-")
        os.chmod(self.root, 0o700)
        self.socket = os.path.join(self.root, "run", "viewerd.sock")
        self.cache = os.path.join(self.root, "cache")
        self.log = os.path.join(self.root, "daemon.log")
        self.arguments = list(arguments)
        self.process: Optional[subprocess.Popen] = None  # type: ignore[type-arg]

    def start(self) -> "Daemon":
        os.makedirs(os.path.dirname(self.socket), mode=0o700, exist_ok=True)
        log = open(self.log, "ab")
        self.process = subprocess.Popen(
            [self.executable, "--config", "/dev/null", "--socket", self.socket, "--cache-dir", self.cache] + self.arguments,
            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        log.close()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"viewerd exited with {self.process.returncode}: {self.read_log()}")
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
                    probe.connect(self.socket)
                return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"viewerd did not start: {self.read_log()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None

    def read_log(self) -> str:
        try:
            with open(self.log, "rb") as f:
                return f.read().decode("utf-8", "replace")[-2000:]
        except OSError:
            return ""

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)


def make_jpeg(path: str, width: int, height: int, noise: bool = True) -> str:
    """A JPEG of that size made with the vips CLI (noise compresses poorly: a real render)."""
    source = f"{path}.v"
    if noise:
        subprocess.run(["vips", "gaussnoise", source, str(width), str(height)], check=True)
    else:
        subprocess.run(["vips", "black", source, str(width), str(height)], check=True)
    subprocess.run(["vips", "jpegsave", source, path, "--Q", "85"], check=True)
    os.unlink(source)
    return path


class DaemonTestCase(unittest.TestCase):
    """One daemon for the class; ``self.images`` is a scratch directory for sources."""

    daemon: Daemon
    images: str

    @classmethod
    def setUpClass(cls) -> None:
        if shutil.which("vips") is None:
            raise unittest.SkipTest("the vips CLI (libvips-tools) is needed to make test images")
        cls.daemon = Daemon().start()
        cls.images = os.path.join(cls.daemon.root, "images")
        os.makedirs(cls.images)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.cleanup()

    def image(self, name: str, width: int, height: int) -> str:
        path = os.path.join(self.images, name)
        if not os.path.exists(path):
            make_jpeg(path, width, height)
        return path


def all_vectors() -> List[str]:
    directory = os.path.join(REPO, "protocol", "vectors")
    return sorted(os.path.join(directory, name) for name in os.listdir(directory) if name.endswith(".bin"))
