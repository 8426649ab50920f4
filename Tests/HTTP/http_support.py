"""Support of the HTTP front's end-to-end tests: a real viewerd and viewerd-http from
$VIEWERD_BUILD_DIR (make test and make http-check set it; else .build/debug), a plain HTTP
client, and readers of the logfmt and nginx log lines the tests look into."""
from __future__ import annotations

import grp
import http.client
import os
import pwd
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import unittest
from typing import Callable, Dict, List, Optional, Sequence, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "clients", "python", "tests"))  # support: Daemon
sys.path.insert(0, os.path.join(REPO, "clients", "python"))           # the viewerd package (STATS)

import support  # noqa: E402
import viewerd  # noqa: E402,F401


def build_dir() -> str:
    return os.environ.get("VIEWERD_BUILD_DIR") or os.path.join(REPO, ".build", "debug")


def executable(name: str) -> str:
    """A product of the build; its absence fails the test (the build makes it), never skips it."""
    path = os.path.join(build_dir(), name)
    if not os.access(path, os.X_OK):
        raise AssertionError(f"{path} is missing: build it (swift build; make http-check does)")
    return path


def require_loopback() -> None:
    """Skips, saying why, where no TCP socket can listen on 127.0.0.1 (nothing here could start)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind(("127.0.0.1", 0))
            probe.listen(1)
    except OSError as error:
        raise unittest.SkipTest(f"no TCP on 127.0.0.1 here: {error}")


def start_daemon(root: str) -> support.Daemon:
    """A viewerd on a socket and store of its own under `root`."""
    executable("viewerd")
    os.makedirs(root, exist_ok=True)
    daemon = support.Daemon(root=root)
    daemon.executable = executable("viewerd")
    return daemon.start()


def parse_logfmt(line: str) -> Dict[str, str]:
    """`key=value key="quoted \\" value"` as a dict (the log lines of ViewerLog)."""
    fields = {}
    for match in re.finditer(r'([A-Za-z0-9_.-]+)=("((?:[^"\\]|\\.)*)"|\S*)', line):
        value = match.group(3) if match.group(3) is not None else match.group(2)
        fields[match.group(1)] = re.sub(r"\\(.)", r"\1", value) if match.group(3) is not None else value
    return fields


class Front:
    """viewerd-http on 127.0.0.1 (a port of its choosing, read from its `event=listening` line),
    the client of `daemon_socket`, with its access log in a file."""

    def __init__(self, daemon_socket: str, roots: Dict[str, str], directory: str, arguments: Sequence[str] = ()) -> None:
        os.makedirs(directory, exist_ok=True)
        self.log = os.path.join(directory, "front.log")
        self.access_log = os.path.join(directory, "access.log")
        self.command = [executable("viewerd-http"), "--listen", "127.0.0.1:0", "--socket", daemon_socket,
                        "--access-log", self.access_log]
        for name, path in roots.items():
            self.command += ["--root", f"{name}={path}"]
        self.command += list(arguments)
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(self.command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        self.address = self._wait_for_listening()
        self.port = int(self.address.rsplit(":", 1)[1])

    def _wait_for_listening(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            for line in self.read_log().splitlines():
                fields = parse_logfmt(line)
                if fields.get("event") == "listening" and fields.get("address", "").startswith("127.0.0.1:"):
                    return fields["address"]
            if self.process.poll() is not None:
                raise AssertionError(f"viewerd-http exited with {self.process.returncode} before listening: "
                                     f"{shlex.join(self.command)}\n{self.read_log()}")
            time.sleep(0.05)
        self.kill()
        raise AssertionError(f"viewerd-http logged no event=listening in 30 s: {shlex.join(self.command)}\n{self.read_log()}")

    def read_log(self) -> str:
        return support.Daemon.read_log(self)  # the tail of self.log

    def access_records(self) -> List[Dict[str, str]]:
        """The access log's lines, each parsed (logfmt)."""
        try:
            with open(self.access_log, encoding="utf-8", errors="replace") as f:
                return [parse_logfmt(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def saw(self, target: str) -> List[Dict[str, str]]:
        """The access log's records of requests for `target` (the path as sent, percent-encoded),
        whichever field carries it."""
        return [record for record in self.access_records() if target in record.values()]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()


class Origin:
    """One origin as a host runs it: a viewerd with its own store and a viewerd-http in front."""

    def __init__(self, directory: str, roots: Dict[str, str], arguments: Sequence[str] = ()) -> None:
        self.directory = directory
        self.daemon = start_daemon(os.path.join(directory, "daemon"))
        try:
            self.front = Front(self.daemon.socket, roots, os.path.join(directory, "front"), arguments)
        except BaseException:
            self.daemon.stop()
            raise

    def stop(self) -> None:
        self.front.stop()
        self.daemon.stop()

    def kill(self) -> None:
        """Gone at once, as a host that dies: nothing answers on its port any more."""
        self.front.kill()
        self.daemon.stop()

    def logs(self) -> str:
        return f"viewerd-http log:\n{self.front.read_log()}\nviewerd log:\n{self.daemon.read_log()}"


def get(port: int, target: str, headers: Optional[Dict[str, str]] = None, method: str = "GET",
        timeout: float = 60) -> Tuple[int, http.client.HTTPMessage, bytes]:
    """One request on a new connection to 127.0.0.1:`port`: (status, headers, body)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request(method, target, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


NGINX = "/usr/sbin/nginx"


def free_port() -> int:
    """A loopback port free now (another may take it before it is bound: callers retry)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class NginxProcess:
    """Debian's nginx in the foreground with a prefix of its own (`directory`): its temporary
    paths there, its error log `directory/error.log`. A caller gives `start` what writes
    `directory/nginx.conf` for a port; `user_line` and `temporary_paths` are the lines every
    such configuration needs."""

    TEMPORARY = ("body", "proxy", "fastcgi", "uwsgi", "scgi")

    def __init__(self, directory: str) -> None:
        if not os.access(NGINX, os.X_OK):
            raise AssertionError(f"{NGINX} is missing: make test-deps installs Debian's nginx")
        self.directory = directory
        self.log = os.path.join(directory, "error.log")
        self.process: Optional[subprocess.Popen] = None
        for name in self.TEMPORARY:
            os.makedirs(os.path.join(directory, name), exist_ok=True)

    @staticmethod
    def user_line() -> str:
        """As root, nginx's workers would switch to "nobody", who cannot enter these directories."""
        if os.geteuid() != 0:
            return ""
        return f"user {pwd.getpwuid(os.geteuid()).pw_name} {grp.getgrgid(os.getegid()).gr_name};\n"

    def temporary_paths(self) -> str:
        return "".join(f"    {name}_temp_path {self.directory}/{name};\n".replace("body_temp", "client_body_temp")
                       for name in self.TEMPORARY)

    def start(self, configure: Callable[[int], None]) -> None:
        """`configure(port)`, then nginx, until it listens on that port; three ports tried (the
        port is chosen before nginx binds it: another may take it)."""
        for _ in range(3):
            self.port = free_port()
            configure(self.port)
            if self._run():
                return
        raise AssertionError(f"nginx did not start:\n{self.read_log()}")

    def _run(self) -> bool:
        with open(os.path.join(self.directory, "nginx.out"), "ab") as out:
            self.process = subprocess.Popen([NGINX, "-p", self.directory, "-c", "nginx.conf", "-e", self.log,
                                             "-g", "daemon off;"], stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return True
            except OSError:
                time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.process.wait(15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def read_log(self) -> str:
        return support.Daemon.read_log(self)
