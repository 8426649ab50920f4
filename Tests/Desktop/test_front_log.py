"""viewerd-thumbnailer's log (issue 36, Must 7), read from its standard error through the real
front on the session bus with a real viewerd: the start (bus, names, the daemon's socket), a
daemon that cannot be reached said at once, a line per Queue at info and per file at debug;
and the files the daemon reads and finds bad (empty, corrupt) answered with the daemon's own
words, not handed to a desktop thumbnailer to fail again."""
from __future__ import annotations

import os
import re
import subprocess
import time
import unittest

from desktop_support import (PNG, ConformanceCase, Front, Thumbnailer, front_executable, require_session_bus, uri)

NAMES = "names=org.freedesktop.thumbnails.Cache1,org.freedesktop.thumbnails.Thumbnailer1"


def log_of(front: Front) -> str:
    with open(front.log, "rb") as f:
        return f.read().decode("utf-8", "replace")


def wait_for_line(front: Front, pattern: str, timeout: float = 20) -> str:
    """The first line of the front's log matching `pattern` (a regex), once it is written."""
    deadline = time.monotonic() + timeout
    while True:
        for line in log_of(front).splitlines():
            if re.search(pattern, line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no line matching {pattern!r} in the front's log:\n{log_of(front)[-3000:]}")
        time.sleep(0.05)


class FrontLogTests(ConformanceCase):
    """At --log-level debug: the start, the daemon, a line per Queue and per file."""

    front_arguments = ("--log-level", "debug")

    def test_the_start_names_the_bus_the_names_and_the_daemons_socket(self) -> None:
        started = wait_for_line(self.front, r"^level=info event=started ")
        self.assertIn(" bus=session ", started)
        self.assertIn(f" {NAMES} ", started)
        self.assertIn(f" socket={self.daemon.socket} ", started)
        self.assertIn(f" cache={self.cache} ", started)
        # and the daemon there answered (its version)
        daemon = wait_for_line(self.front, r"^level=info event=daemon ")
        self.assertIn(f"socket={self.daemon.socket} version={self.version()}", daemon)

    def test_a_queue_is_one_info_line_and_each_file_a_debug_line(self) -> None:
        good = self.photo("logged.jpg")
        missing = os.path.join(self.images, "not-there.jpg")
        handle = self.client.queue([uri(good), uri(missing), uri(good)])
        self.assertTrue(self.client.wait(handle)["finished"])

        summary = wait_for_line(self.front, rf"^level=info event=queue handle={handle} ")
        self.assertRegex(summary, r" files=2 ready=1 failed=1 cancelled=0 time_ms=\d+$")
        written = wait_for_line(self.front, rf"^level=debug event=file uri={re.escape(uri(good))} ")
        self.assertRegex(written, r" flavor=large outcome=written time_ms=\d+ thumbnail=")
        failed = wait_for_line(self.front, rf"^level=debug event=file uri={re.escape(uri(missing))} ")
        self.assertIn(" outcome=failed ", failed)
        self.assertIn(" code=8 error=", failed)

    def test_a_dequeued_queue_counts_its_files_cancelled(self) -> None:
        files = [self.photo(f"dequeued-{i}.jpg", 3000, 2000) for i in range(6)]
        handle = self.client.queue([uri(f) for f in files], scheduler="background")
        self.client.dequeue(handle)
        self.assertTrue(self.client.wait(handle)["finished"])
        summary = wait_for_line(self.front, rf"^level=info event=queue handle={handle} ")
        counts = dict(re.findall(r" (files|ready|failed|cancelled)=(\d+)", summary))
        self.assertEqual(counts["files"], "6", summary)
        self.assertEqual(int(counts["ready"]) + int(counts["failed"]) + int(counts["cancelled"]), 6, summary)
        self.assertIn(" dequeued=yes", summary)


class NoDaemonLogTests(unittest.TestCase):
    """A front whose daemon socket is missing (the review's `--socket` typo), at the default level."""

    def setUp(self) -> None:
        require_session_bus()
        front_executable()
        import tempfile
        self.root = tempfile.mkdtemp(prefix="viewerd-front-log-")
        self.socket = os.path.join(self.root, "run", "no-viewerd.sock")
        self.front = Front(self.socket, os.path.join(self.root, "thumbnails"),
                           environment={"XDG_DATA_DIRS": self.root, "XDG_DATA_HOME": self.root})
        self.addCleanup(self.front.stop)

    def test_no_daemon_is_said_at_start_at_warning_and_a_queue_still_summarized(self) -> None:
        warning = wait_for_line(self.front, r"^level=warning event=daemon-unreachable ")
        self.assertIn(f"socket={self.socket} ", warning)
        self.assertIn("No such file or directory", warning)

        path = os.path.join(self.root, "a.jpg")
        with open(path, "wb") as f:
            f.write(b"\xff\xd8\xff")
        client = Thumbnailer()
        self.addCleanup(client.close)
        handle = client.queue([uri(path)])
        outcome = client.wait(handle)
        self.assertEqual([e["code"] for e in outcome["errors"]], [1])
        summary = wait_for_line(self.front, rf"^level=info event=queue handle={handle} ")
        self.assertIn(" files=1 ready=0 failed=1 cancelled=0 ", summary)
        # said once, not once a file; and no debug lines at the default level
        self.assertEqual(log_of(self.front).count("event=daemon-unreachable"), 1, log_of(self.front))
        self.assertNotIn("level=debug", log_of(self.front))

    def test_a_log_level_that_is_none_is_a_usage_error(self) -> None:
        for arguments, environment, named in [(["--log-level", "loud"], {}, "--log-level loud"),
                                              ([], {"VIEWERD_LOG_LEVEL": "loud"}, "VIEWERD_LOG_LEVEL loud")]:
            run = subprocess.run([front_executable(), "--socket", self.socket, *arguments], capture_output=True, text=True,
                                 timeout=30, env=dict(os.environ, **environment))
            self.assertEqual(run.returncode, 64, run.stderr)
            self.assertIn(named, run.stderr)
            self.assertIn("expected debug, info, warning or error", run.stderr)


class BadFilesAreNotHelpedTests(ConformanceCase):
    """A desktop thumbnailer for image/jpeg installed (gdk-pixbuf's stands in: this one would
    always make a thumbnail): a JPEG the daemon read and found bad is answered with the daemon's
    message, and the helper never runs (it would have made a thumbnail: Ready)."""

    @classmethod
    def front_environment(cls):
        share = os.path.join(cls.root, "share")
        helpers = os.path.join(share, "thumbnailers")
        os.makedirs(helpers)
        program = os.path.join(helpers, "gdk-pixbuf-thumbnailer.sh")
        with open(program, "w") as f:
            f.write('#!/bin/sh\nexec vips black "$2" 64 48\n')
        os.chmod(program, 0o755)
        with open(os.path.join(helpers, "gdk-pixbuf-thumbnailer.thumbnailer"), "w") as f:
            f.write(f"[Thumbnailer Entry]\nTryExec={program}\nExec={program} %i %o %s\n"
                    "MimeType=image/jpeg;image/png;\n")
        return {"XDG_DATA_DIRS": share, "XDG_DATA_HOME": os.path.join(cls.root, "no-data-home")}

    def test_an_empty_jpeg_gets_the_daemons_message_not_the_helpers(self) -> None:
        empty = os.path.join(self.images, "empty.jpg")
        open(empty, "wb").close()
        outcome = self.client.wait(self.client.queue([uri(empty)], ["image/jpeg"]))
        self.assertEqual(outcome["ready"], [], "the helper ran and made a thumbnail of an empty file")
        self.assertEqual(len(outcome["errors"]), 1, outcome)
        self.assertIn("the file is empty", outcome["errors"][0]["message"])
        self.assertEqual(outcome["errors"][0]["code"], 0)  # the daemon's unsupported-format, as without helpers
        self.assertFalse(os.path.exists(self.thumbnail_path(empty)))

    def test_a_corrupt_jpeg_gets_the_daemons_corrupt_message(self) -> None:
        corrupt = os.path.join(self.images, "corrupt.jpg")
        with open(corrupt, "wb") as f:
            f.write(b"\xff\xd8\xff\xe0\x00\x10JFIF\x00" + bytes((i * 37 + 11) % 256 for i in range(4000)))
        outcome = self.client.wait(self.client.queue([uri(corrupt)], ["image/jpeg"]))
        self.assertEqual(outcome["ready"], [], "the helper ran and made a thumbnail of a corrupt file")
        self.assertEqual([e["code"] for e in outcome["errors"]], [2], outcome)
        self.assertIn("corrupt image", outcome["errors"][0]["message"])
        self.assertFalse(os.path.exists(self.thumbnail_path(corrupt)))

    def test_a_type_the_daemon_does_not_read_still_goes_to_the_helper(self) -> None:
        # (a file of the helper's type that the daemon does not read: a PNG's type, text inside)
        other = os.path.join(self.images, "not-viewerds.png")
        with open(other, "w") as f:
            f.write("some text, not a PNG\n")
        outcome = self.client.wait(self.client.queue([uri(other)], ["image/png"]))
        self.assertEqual(outcome["ready"], [uri(other)], outcome)
        self.assertEqual(PNG(self.thumbnail_path(other)).width, 64)


if __name__ == "__main__":
    unittest.main()
