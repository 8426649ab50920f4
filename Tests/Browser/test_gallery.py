"""The web gallery in Debian's real Chromium (headless, loopback), against a real viewerd and
viewerd-http (Tests/HTTP's helpers) on a generated folder: every visible cell shows its
placeholder, then its thumbnail; the page logs no errors."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "HTTP"))
import http_support  # noqa: E402


def chromium():
    """A headless Chromium driven by Selenium, or SkipTest with the reason where it cannot start."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise unittest.SkipTest(f"python3-selenium is missing: {error}")
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1000,800", "--force-device-scale-factor=1"]:
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
        browser.set_script_timeout(120)
        return browser
    except Exception as error:  # noqa: BLE001 - any failure to start is the skip's reason
        raise unittest.SkipTest(f"Chromium cannot start here: {error}")


class GalleryTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        cls.directory = tempfile.mkdtemp(prefix="viewerd-gallery-")
        cls.photos = os.path.join(cls.directory, "photos")
        os.mkdir(cls.photos)
        for i in range(60):
            width, height = (400, 300) if i % 3 else (300, 400)
            subprocess.run(["vips", "xyz", os.path.join(cls.directory, "xyz.v"), str(width), str(height)], check=True)
            subprocess.run(["vips", "linear", os.path.join(cls.directory, "xyz.v"), os.path.join(cls.photos, f"p{i:03}.jpg"),
                            f"{1 + i % 5}", f"{i * 3}"], check=True)
        # 1,000 items for the fast scroll: copies of the first photos (cp, not vips: seconds).
        cls.many = os.path.join(cls.directory, "many")
        os.mkdir(cls.many)
        for i in range(1000):
            shutil.copyfile(os.path.join(cls.photos, f"p{i % 60:03}.jpg"), os.path.join(cls.many, f"m{i:04}.jpg"))
        cls.origin = http_support.Origin(os.path.join(cls.directory, "origin"), {"photos": cls.photos, "many": cls.many})
        try:
            cls.browser = chromium()
        except BaseException:
            cls.origin.stop()
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        cls.browser.quit()
        cls.origin.stop()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def wait(self, script: str, what: str, seconds: float = 60):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.browser.execute_script(script)
            if value:
                return value
            time.sleep(0.1)
        self.fail(f"{what}: not within {seconds} s\n{self.origin.logs()}")

    def test_visible_cells_get_placeholders_then_thumbnails(self) -> None:
        self.browser.get(f"http://127.0.0.1:{self.origin.front.port}/gallery/photos/")
        self.wait("return window.gallery && window.gallery.complete", "the layout")
        sample = self.browser.execute_script("return window.gallery.grid.sample()")
        self.assertGreater(sample["shown"], 10)
        self.assertEqual(sample["blank"], 0, "a visible cell without its placeholder")
        self.wait("const g = window.gallery.grid, view = g.scroller.getBoundingClientRect();"
                  "return [...g.cells.values()].filter((c) => { const b = c.getBoundingClientRect();"
                  " return b.bottom > view.top && b.top < view.bottom; })"
                  ".every((c) => c.dataset.loaded && c.querySelector('img.thumb').complete);",
                  "every visible cell's thumbnail")
        errors = [entry for entry in self.browser.get_log("browser") if entry["level"] == "SEVERE"]
        self.assertEqual(errors, [])


    def test_fast_scroll_leaves_no_cell_blank_and_cancels(self) -> None:
        self.browser.get(f"http://127.0.0.1:{self.origin.front.port}/gallery/many/")
        self.wait("return window.gallery && window.gallery.complete", "the layout", 120)
        # Every frame: scroll on, place the cells as that frame's update does, sample them.
        frames = self.browser.execute_async_script("""
            const done = arguments[0], g = window.gallery.grid, s = g.scroller;
            const frames = []; const step = () => {
              s.scrollTop += 120; g.update(); frames.push(g.sample());
              if (s.scrollTop + s.clientHeight >= s.scrollHeight - 1 || frames.length > 2000) done(frames);
              else requestAnimationFrame(step);
            }; requestAnimationFrame(step);""")
        self.assertGreater(len(frames), 20)
        self.assertTrue(all(frame["shown"] > 0 for frame in frames))
        self.assertEqual([frame for frame in frames if frame["blank"]], [], "frames with a visible cell without its placeholder")
        self.assertGreater(self.browser.execute_script("return window.gallery.loader.stats.aborted"), 0)


if __name__ == "__main__":
    unittest.main()
