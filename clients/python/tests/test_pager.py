"""viewerd.Pager against a real daemon: the page on screen, ±2 ahead, the pages swiped past
cancelled and nothing of them left in the client."""
from __future__ import annotations

import os
import shutil
import tempfile
import time
import unittest

import support
import viewerd


class PagerTests(unittest.TestCase):
    def setUp(self) -> None:
        if shutil.which("vips") is None:
            raise unittest.SkipTest("the vips CLI (libvips-tools) is needed to make test images")
        # One render worker, held by a file that hangs it, so every page waits in the queue until
        # the test cancels the hang (its time-out is far away: no race with a loaded machine).
        self.daemon = support.Daemon(name="viewerd-testing", arguments=["--workers", "1", "--job-timeout", "60"]).start()
        self.addCleanup(self.daemon.cleanup)
        images = tempfile.mkdtemp(dir=self.daemon.root)
        self.paths = [support.make_jpeg(os.path.join(images, f"p{i}.jpg"), 600, 400) for i in range(8)]
        self.hang = support.make_jpeg(os.path.join(images, "viewerd-test-hang.jpg"), 300, 200)
        self.client = viewerd.Client(self.daemon.socket)
        self.addCleanup(self.client.close)

    def wait_for(self, condition, what: str) -> None:  # type: ignore[no-untyped-def]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if condition(self.client.stats()):
                return
            time.sleep(0.05)
        self.fail(f"{what}: {self.client.stats()}")

    def test_the_pager_asks_two_pages_ahead_and_cancels_the_pages_swiped_past(self) -> None:
        hung = self.client.start_render(self.hang, 64, 64)
        self.wait_for(lambda s: s["jobs_running"] == 1, "the hang runs")
        pager = viewerd.Pager(self.client, self.paths, 1280, 720)
        self.assertEqual([pager.priority(page, 5) for page in range(8)],
                         [None, None, None, "normal", "high", "visible", "high", "normal"])
        pager.show(0)
        self.wait_for(lambda s: s["requests"] == 4, "the hang, page 0 and pages 1 and 2 ahead")
        pager.show(5)
        self.wait_for(lambda s: s["requests"] == 9 and s["cancelled_queued"] + s["cancelled_running"] == 3,
                      "pages 3 to 7 asked, 0 to 2 cancelled")
        hung.cancel()  # the worker, killed after the cancel's grace, is free for the pages
        with self.assertRaises(viewerd.Cancelled):
            hung.result()
        events = list(pager.events(5))
        self.assertIsInstance(events[-1], viewerd.Result)
        self.assertEqual((events[-1].width, events[-1].height), (600, 400))
        with self.assertRaises(KeyError):
            list(pager.events(0))  # swiped past
        for page in (3, 4, 6, 7):
            self.assertIsInstance(list(pager.events(page))[-1], viewerd.Result)
        # Read to its end, a page within reach is not asked again; the swiped-past pages' answers
        # were dropped, not kept for nobody.
        pager.show(5)
        self.assertEqual(self.client.stats()["requests"], 9)
        self.assertEqual(set(self.client._current().inbox), set())
        pager.close()


if __name__ == "__main__":
    unittest.main()
