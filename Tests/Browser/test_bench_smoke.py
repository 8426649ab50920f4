"""`make bench`'s browser part (bench/browser-bench.py) runs end to end on a small album, so a
change to the gallery or the front cannot break the harness unseen (its figures are the bench's,
not checked here): as BenchSmokeTests does for viewerd-bench."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "HTTP"))
import http_support  # noqa: E402


class BrowserBenchSmokeTests(unittest.TestCase):
    def test_the_browser_part_runs_and_writes_its_json(self) -> None:
        http_support.require_loopback()
        if not shutil.which("chromium") or not shutil.which("chromedriver") or not shutil.which("nginx"):
            raise unittest.SkipTest("chromium, chromedriver or nginx is missing (make test-deps installs them)")
        directory = tempfile.mkdtemp(prefix="viewerd-browser-bench-")
        try:
            run = subprocess.run([sys.executable, os.path.join(http_support.REPO, "bench", "browser-bench.py"), "--smoke",
                                  "--build-dir", http_support.build_dir(), "--cache", os.path.join(directory, "cache"),
                                  "--results", os.path.join(directory, "results")],
                                 capture_output=True, text=True, timeout=600)
            self.assertEqual(run.returncode, 0, f"{run.stdout[-4000:]}\n{run.stderr[-4000:]}")
            results = glob.glob(os.path.join(directory, "results", "browser-*.json"))
            self.assertEqual(len(results), 1, run.stdout[-2000:])
            with open(results[0], encoding="utf-8") as f:
                figures = json.load(f)
            for part in ["coldFirstScreen", "warmFirstScreen", "coldScroll", "pager"]:
                self.assertIn(part, figures)
        finally:
            shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    unittest.main()
