"""The web gallery in Debian's real Chromium (headless, loopback), against a real viewerd and
viewerd-http (Tests/HTTP's helpers) on generated folders of photos and videos.

What a person would see is checked on screenshots: every visible cell shows its placeholder,
then its own photo (the screenshot's cell against the original scaled as the cell shows it,
and against another photo, which must differ); a fast scroll leaves no cell blank and the
daemon counts the cancels of the cells that left; the pager swipes 50 pages, each with an
image at once and the screen rendition last; a zoom to full scale shows tiles that match a
direct region render pixel for pixel (and not the blurred screen rendition); a video plays
its original by ranges; a million items scroll to the end with a few hundred elements; a
phone's width holds rows of photos. No test may leave an error in the page's console."""
from __future__ import annotations

import io
import math
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request
from typing import Dict, List, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "HTTP"))
import http_support  # noqa: E402
import viewerd  # noqa: E402  (http_support puts clients/python on the path)

from PIL import Image, ImageChops, ImageFilter, ImageStat  # noqa: E402

WINDOW = (1000, 800)
WEB = os.path.join(http_support.REPO, "web")


def chromium():
    """A headless Chromium driven by Selenium, or SkipTest with the reason where it cannot start."""
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as error:
        raise unittest.SkipTest(f"python3-selenium is missing: {error}")
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                     "--force-device-scale-factor=1", "--hide-scrollbars", "--autoplay-policy=no-user-gesture-required"]:
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    try:
        browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
        browser.set_script_timeout(120)
        return browser
    except Exception as error:  # noqa: BLE001 - any failure to start is the skip's reason
        raise unittest.SkipTest(f"Chromium cannot start here: {error}")


def blocks(path: str, size: Tuple[int, int], block: int, seed: int) -> None:
    """A JPEG of random coloured squares `block` px wide: every photo unlike every other, and
    detail that a placeholder, a wrong photo, a stretch or an upscale cannot reproduce."""
    rng = random.Random(seed)
    columns, rows = -(-size[0] // block), -(-size[1] // block)
    small = Image.new("RGB", (columns, rows))
    small.putdata([(rng.randrange(256), rng.randrange(256), rng.randrange(256)) for _ in range(columns * rows)])
    small.resize((columns * block, rows * block), Image.NEAREST).crop((0, 0) + size).save(path, quality=95, subsampling=0)


def cover(image: Image.Image, size: Tuple[int, int]) -> Image.Image:
    """`image` scaled to cover `size` and centred, as CSS `object-fit: cover` shows it."""
    scale = max(size[0] / image.width, size[1] / image.height)
    scaled = image.resize((max(size[0], round(image.width * scale)), max(size[1], round(image.height * scale))), Image.LANCZOS)
    left, top = (scaled.width - size[0]) // 2, (scaled.height - size[1]) // 2
    return scaled.crop((left, top, left + size[0], top + size[1]))


def edges(image: Image.Image) -> float:
    """The mean edge strength of `image` (grey): what a blur loses."""
    return ImageStat.Stat(image.convert("L").filter(ImageFilter.FIND_EDGES)).mean[0]


def difference(a: Image.Image, b: Image.Image) -> float:
    """Mean absolute difference of two same-sized RGB images, 0 to 255."""
    return sum(ImageStat.Stat(ImageChops.difference(a.convert("RGB"), b.convert("RGB"))).mean) / 3


class GalleryTests(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        cls.directory = tempfile.mkdtemp(prefix="viewerd-gallery-")
        cls.photos = os.path.join(cls.directory, "photos")
        os.mkdir(cls.photos)
        for i in range(60):
            blocks(os.path.join(cls.photos, f"p{i:03}.jpg"), (800, 600) if i % 3 else (600, 800), 100, i)
        for i, (width, height) in enumerate([(320, 240), (240, 320)]):
            subprocess.run(["ffmpeg", "-loglevel", "error", "-y", "-f", "lavfi", "-i", f"testsrc=size={width}x{height}:rate=25",
                            "-t", "4", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart",
                            os.path.join(cls.photos, f"v{i}.mp4")], check=True)
        # A folder whose name a URL must encode (a space, an accent), its photos' names too.
        cls.summer = os.path.join(cls.photos, "Summer 2024 été")
        os.mkdir(cls.summer)
        for i, name in enumerate(["a b.jpg", "ü #1.jpg", "100%.jpg"]):
            blocks(os.path.join(cls.summer, name), (800, 600), 100, 500 + i)
        # 1,000 items for the fast scroll: copies of the first photos (cp: seconds), each its own file.
        cls.many = os.path.join(cls.directory, "many")
        os.mkdir(cls.many)
        for i in range(1000):
            shutil.copyfile(os.path.join(cls.photos, f"p{i % 60:03}.jpg"), os.path.join(cls.many, f"m{i:04}.jpg"))
        # One photo larger than the screen, 8 px squares (on JPEG's 8 px grid): at full scale its
        # tiles are sharp where the screen rendition stretched would be a blur.
        cls.zoom = os.path.join(cls.directory, "zoom")
        os.mkdir(cls.zoom)
        cls.big = os.path.join(cls.zoom, "big.jpg")
        blocks(cls.big, (2400, 1800), 8, 1234)
        cls.origin = http_support.Origin(os.path.join(cls.directory, "origin"),
                                         {"photos": cls.photos, "many": cls.many, "zoom": cls.zoom}, ["--web-dir", WEB])
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

    def tearDown(self) -> None:
        errors = [entry for entry in self.browser.get_log("browser") if entry["level"] == "SEVERE"]
        self.assertEqual(errors, [], "errors in the page's console")

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.origin.front.port}"

    every_visible_thumbnail = """const g = window.gallery.grid, view = g.scroller.getBoundingClientRect();
        return [...g.cells.values()].filter((c) => { const b = c.getBoundingClientRect();
          return b.bottom > view.top && b.top < view.bottom; })
          .every((c) => c.dataset.loaded && c.querySelector('img.thumb').complete);"""

    def wait(self, script: str, what: str, seconds: float = 60, *arguments):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = self.browser.execute_script(script, *arguments)
            if value:
                return value
            time.sleep(0.05)
        self.fail(f"{what}: not within {seconds} s\n{self.origin.logs()}")

    def album(self, name: str, seconds: float = 60) -> None:
        self.browser.get(f"{self.base}/gallery/{name}/")
        self.wait("return window.gallery && window.gallery.complete", f"the layout of {name}", seconds)

    def screenshot(self) -> Image.Image:
        return Image.open(io.BytesIO(self.browser.get_screenshot_as_png())).convert("RGB")

    def cancels(self) -> int:
        with viewerd.Client(self.origin.daemon.socket) as client:
            counters = client.stats()
        return counters["cancelled_queued"] + counters["cancelled_running"]

    def test_visible_cells_get_placeholders_then_their_own_photos(self) -> None:
        self.album("photos")
        sample = self.browser.execute_script("return window.gallery.grid.sample()")
        self.assertGreater(sample["shown"], 10)
        self.assertEqual(sample["blank"], 0, "a visible cell without its placeholder")
        cells: List[Dict] = self.wait("""
            const g = window.gallery.grid, view = g.scroller.getBoundingClientRect();
            const shown = [...g.cells.values()].filter((c) => { const b = c.getBoundingClientRect();
              return b.top >= view.top && b.bottom <= view.bottom && b.left >= 0 && b.right <= innerWidth; });
            if (!shown.every((c) => c.dataset.loaded && c.querySelector('img.thumb').complete)) return null;
            return shown.map((c) => { const b = c.getBoundingClientRect();
              return { name: g.items[c.dataset.index].name, kind: g.items[c.dataset.index].kind,
                       alt: c.querySelector('img.thumb').alt, label: c.getAttribute('aria-label'),
                       x: b.left, y: b.top, width: b.width, height: b.height }; });""",
                                           "every visible cell's thumbnail")
        time.sleep(0.3)  # the last decoded image painted
        screen = self.screenshot()
        photos = [cell for cell in cells if cell["kind"] == "photo"]
        self.assertGreater(len(photos), 8)
        for number, cell in enumerate(photos):
            self.assertEqual(cell["alt"], cell["name"])
            self.assertEqual(cell["label"], f"Photo {cell['name']}")
            # 3 px in from each edge: the cell's rounding and the focus ring aside.
            box = (round(cell["x"]) + 3, round(cell["y"]) + 3, round(cell["x"] + cell["width"]) - 3, round(cell["y"] + cell["height"]) - 3)
            shown = screen.crop(box)
            size = (box[2] - box[0], box[3] - box[1])
            own = cover(Image.open(os.path.join(self.photos, cell["name"])), (round(cell["width"]), round(cell["height"])))
            own = own.crop((3, 3, 3 + size[0], 3 + size[1]))
            other_name = photos[(number + 1) % len(photos)]["name"]
            other = cover(Image.open(os.path.join(self.photos, other_name)), (round(cell["width"]), round(cell["height"])))
            other = other.crop((3, 3, 3 + size[0], 3 + size[1]))
            mine, theirs = difference(shown, own), difference(shown, other)
            self.assertLess(mine, 16, f"{cell['name']}: the cell is not its photo (mean difference {mine:.1f})")
            self.assertGreater(theirs, 2 * mine + 20, f"{cell['name']}: as close to {other_name} ({theirs:.1f}) as to itself ({mine:.1f})")

    def test_a_new_window_of_the_layout_keeps_the_cells_in_view(self) -> None:
        """The layout's background windows arrive while the first screen loads: each must leave
        the cells already made (and their images) as they are, not make them again."""
        self.album("photos")
        self.wait(self.every_visible_thumbnail, "every visible cell's thumbnail")
        kept = self.browser.execute_script("""
            const g = window.gallery.grid, before = new Map(g.cells), started = window.gallery.loader.stats.started;
            g.setItems(g.items, g.total);  // what each background window does
            return { same: [...before].every(([index, cell]) => g.cells.get(index) === cell),
                     requests: window.gallery.loader.stats.started - started, cells: before.size };""")
        self.assertGreater(kept["cells"], 10)
        self.assertTrue(kept["same"], "the cells were made again")
        self.assertEqual(kept["requests"], 0, "thumbnails asked again")

    def test_the_loader_starts_the_newest_of_equally_urgent_requests(self) -> None:
        """In a fast scroll the oldest waiting cells are the ones about to leave the view."""
        self.album("photos")
        order = self.browser.execute_async_script("""
            const done = arguments[0];
            import('/gallery/assets/loader.js').then(({ Loader, iiif }) => {
              const items = window.gallery.grid.items, loader = new Loader(1), started = [];
              const start = loader.start.bind(loader);
              loader.start = (job) => { started.push(job.key); start(job); };
              let left = 3;
              for (const key of [0, 1, 2]) loader.want(key, iiif(items[key], 128), 0, () => { if (!--left) done(started); });
            });""")
        self.assertEqual(order, [0, 2, 1])

    def test_thumbnails_follow_the_device_pixel_ratio(self) -> None:
        """What srcset would do: at twice the density (browser zoom, a HiDPI screen) the cells in
        view ask their thumbnails again, sharp enough for the new pixels."""
        visible = """const g = window.gallery.grid, view = g.scroller.getBoundingClientRect();
            const shown = [...g.cells.values()].filter((c) => { const b = c.getBoundingClientRect();
              return b.top >= view.top && b.bottom <= view.bottom; });
            const widths = shown.map((c) => { const images = c.querySelectorAll('img.thumb'), last = images[images.length - 1];
              return last && last.complete ? last.naturalWidth / c.getBoundingClientRect().width : 0; });
            return widths.length && widths.every((w) => w > 0) ? widths : null;"""
        self.album("photos")
        before = self.wait(visible, "the thumbnails at 1 device pixel per CSS pixel")
        self.assertTrue(all(0.95 <= ratio < 1.7 for ratio in before), before)  # the box a size up from the cell
        self.browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                     {"width": 0, "height": 0, "deviceScaleFactor": 2, "mobile": False})
        try:
            after = self.wait(visible.replace("every((w) => w > 0)", "every((w) => w >= 1.9)"),
                              "the thumbnails again at 2 device pixels per CSS pixel", 30)
            self.assertTrue(all(ratio >= 1.9 for ratio in after), after)
        finally:
            self.browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

    def test_fast_scroll_leaves_no_cell_blank_and_cancels_in_the_daemon(self) -> None:
        before = self.cancels()
        self.album("many", 120)
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
        aborted = self.browser.execute_script("return window.gallery.loader.stats.aborted")
        self.assertGreater(aborted, 0)
        # Each abort closed its connection; the front noticed and sent CANCEL: the daemon counts them.
        deadline = time.monotonic() + 10
        while self.cancels() == before and time.monotonic() < deadline:
            time.sleep(0.1)
        self.assertGreater(self.cancels() - before, 0, f"{aborted} aborted in the page, no cancel in the daemon's STATS")

    def test_a_folder_whose_name_is_encoded_in_the_url(self) -> None:
        """A folder named "Summer 2024 été" is reached from its parent's link, its photos shown:
        the page once asked the layout of "Summer%202024%20%C3%A9t%C3%A9" and got a 404."""
        from selenium.webdriver.common.by import By
        self.album("photos")
        self.browser.find_element(By.LINK_TEXT, "Summer 2024 été").click()
        self.wait("return window.gallery && window.gallery.complete && location.pathname.includes('Summer')", "the folder's layout")
        self.assertEqual(self.browser.find_element(By.ID, "count").text, "3 items")
        self.assertEqual(self.browser.find_element(By.ID, "crumbs").text, "Gallery / photos / Summer 2024 été")
        self.wait(self.every_visible_thumbnail, "the folder's thumbnails")
        names = self.browser.execute_script("return [...window.gallery.grid.cells.values()].map((c) => c.querySelector('img.thumb').alt).sort()")
        self.assertEqual(names, sorted(["a b.jpg", "ü #1.jpg", "100%.jpg"]))

    def test_a_million_items_scroll_to_the_end_with_few_elements(self) -> None:
        """Immich #16788: a page as tall as 888,198 photos passes Chromium's 2^24 px and its end
        cannot be reached. The grid's spacer is capped and the scroll mapped onto the content."""
        self.album("photos")
        seen = self.browser.execute_script("""
            const g = window.gallery.grid, s = g.scroller, total = 1000000, items = new Array(total);
            for (let i = 0; i < total; i++) items[i] = { index: i, name: `x${i}.jpg`, kind: 'photo',
              width: i % 3 ? 400 : 300, height: i % 3 ? 300 : 400, placeholder: g.items[i % 60].placeholder };
            g.setItems(items, total);
            const seen = { height: g.layout.height, spacer: s.scrollHeight, most: 0, elements: 0 };
            for (let step = 0; step <= 50; step++) {
              s.scrollTop = (s.scrollHeight - s.clientHeight) * step / 50; g.update();
              seen.most = Math.max(seen.most, g.cells.size);
              seen.elements = Math.max(seen.elements, document.querySelectorAll('.cell').length);
              if (g.sample().blank) seen.blank = step;
            }
            const last = g.cells.get(total - 1), view = s.getBoundingClientRect();
            seen.last = last ? last.getBoundingClientRect().bottom <= view.bottom + 1 && last.getBoundingClientRect().top >= view.top : false;
            return seen;""")
        self.assertGreater(seen["height"], 2 ** 24, "the album is not taller than Chromium's limit: the test proves nothing")
        self.assertLess(seen["spacer"], 2 ** 24)
        self.assertTrue(seen["last"], "the millionth item is not in view at the end of the scroll")
        self.assertLess(seen["most"], 300, "cells are not recycled")
        self.assertEqual(seen["elements"], seen["most"])
        self.assertNotIn("blank", seen)

    def test_a_phones_width(self) -> None:
        self.browser.set_window_size(400, 800)
        try:
            self.album("photos")
            rows = self.browser.execute_script("""
                const g = window.gallery.grid, rows = new Map();
                for (const c of g.cells.values()) { const b = c.getBoundingClientRect();
                  if (b.right > innerWidth + 0.5 || b.left < 0) return 'a cell past the screen: ' + b.left + '..' + b.right;
                  rows.set(Math.round(b.top), (rows.get(Math.round(b.top)) || 0) + 1); }
                return [...rows.values()];""")
            self.assertIsInstance(rows, list, rows)
            self.assertGreater(sum(rows) / len(rows), 1.5, "a phone's row should hold more than one photo")
            hidden = self.browser.execute_script("return getComputedStyle(document.querySelector('#pager .next')).display")
            self.assertEqual(hidden, "none", "the pager's arrow buttons take a phone's screen: it swipes")
        finally:
            self.browser.set_window_size(*WINDOW)

    def test_pager_swipes_fifty_pages(self) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys
        self.album("photos")
        self.browser.find_element(By.CSS_SELECTOR, '.cell[data-index="0"]').click()
        self.wait("return window.gallery.pager.isOpen && window.gallery.pager.index === 0", "the pager on the first photo")
        stage = self.browser.find_element(By.CSS_SELECTOR, "#pager .stage")
        for page in range(1, 51):
            ActionChains(self.browser).move_to_element(stage).click_and_hold().move_by_offset(-200, 10).release().perform()
            # An image on the page at once (the swipe's own event handler put it there): the screen
            # rendition, the grid's thumbnail or the placeholder, never an empty page.
            shown = self.browser.execute_script("""const p = window.gallery.pager, image = p.stage.querySelector('img.page');
                return [p.index, image ? image.src.slice(0, 5) : null];""")
            self.assertEqual(shown[0], page)
            self.assertIn(shown[1], ["blob:", "data:"], f"page {page} has no image at once")
            caption = self.browser.find_element(By.CSS_SELECTOR, "#pager .caption").text
            self.assertTrue(caption.startswith(f"p{page:03}.jpg ({page + 1} of 62)"), caption)
        # The last page ends on its screen rendition, larger than any grid thumbnail asked here.
        width = self.wait("""const p = window.gallery.pager, image = p.stage.querySelector('img.page');
            return p.screens.has(50) && image.src === p.screens.get(50) && image.complete && image.naturalWidth;""",
                          "page 50's screen rendition")
        self.assertEqual(width, 600 if 50 % 3 == 0 else 800)  # the photo whole (the box is over its size)
        # Pages swiped past are no longer wanted: nothing but the neighbours in the loader.
        keys = self.browser.execute_script("const l = window.gallery.loader;"
                                           "return [...l.running.keys(), ...l.waiting.keys()].filter((k) => String(k).startsWith('page:'));")
        self.assertTrue(all(abs(int(key[5:]) - 50) <= 1 for key in keys), keys)
        # The keys still page after the pointer's swipes, wherever they left the focus.
        ActionChains(self.browser).send_keys(Keys.ARROW_RIGHT).perform()
        self.wait("return window.gallery.pager.index === 51", "ArrowRight")
        ActionChains(self.browser).scroll_by_amount(0, 200).perform()
        self.wait("return window.gallery.pager.index === 52", "the wheel")
        ActionChains(self.browser).send_keys(Keys.ESCAPE).perform()
        self.wait("return !window.gallery.pager.isOpen && document.activeElement.dataset.index === '52'",
                  "Escape back to the grid, focus on the photo last shown")

    def test_zoom_to_full_scale_shows_tiles_that_match_a_region_render(self) -> None:
        from selenium.webdriver.common.by import By
        self.album("zoom")
        self.browser.find_element(By.CSS_SELECTOR, '.cell[data-index="0"]').click()
        self.wait("const p = window.gallery.pager, image = p.stage.querySelector('img.page');"
                  "return p.screens.has(0) && image && image.src === p.screens.get(0) && image.complete;", "the screen rendition")
        self.browser.execute_script("window.gallery.pager.zoomTo(1)")
        view = self.wait("const z = window.gallery.pager.zoom;"
                         "return z && z.complete && { ox: z.ox, oy: z.oy, scale: z.scale, keys: [...z.tiles.keys()], id: z.item.id };",
                         "every tile in view")
        self.assertEqual(view["scale"], 1)
        self.assertTrue(view["keys"] and all(key.startswith("tile:1:") for key in view["keys"]), view["keys"])
        time.sleep(0.3)
        screen = self.screenshot()
        # Clear of the pager's buttons and caption. The view puts the image's pixel ox + s on the
        # screen's pixel s, its positions rounded to whole pixels as JavaScript rounds (half up).
        left, top, right, bottom = 80, 80, WINDOW[0] - 80, screen.height - 80
        shown = screen.crop((left, top, right, bottom))
        x, y = left - math.floor(0.5 - view["ox"]), top - math.floor(0.5 - view["oy"])
        width, height = right - left, bottom - top
        with urllib.request.urlopen(f"{self.base}/iiif/3/{view['id']}/{x},{y},{width},{height}/max/0/default.png") as response:
            region = Image.open(io.BytesIO(response.read())).convert("RGB")
        self.assertEqual(region.size, shown.size)
        # The tiles are JPEG (quality 80: about 10 of 255 from the original on these squares).
        mine = difference(shown, region)
        self.assertLess(mine, 14, f"the zoomed view is not the region {x},{y},{width},{height} (mean difference {mine:.1f})")
        original = Image.open(self.big).convert("RGB")
        self.assertLess(difference(shown, original.crop((x, y, x + width, y + height))), 14)
        shifted = difference(shown, original.crop((x + 8, y + 8, x + 8 + width, y + 8 + height)))
        self.assertGreater(shifted, 3 * mine + 20, "the comparison cannot tell a region 8 px away")
        # Sharp: as much edge as the original has, where the screen rendition stretched (what the
        # user sees before the tiles come) has well under half.
        base = self.browser.execute_script("return window.gallery.pager.zoom.base.naturalWidth")
        self.assertLess(base, 2400)
        blurred = original.resize((base, base * 3 // 4), Image.LANCZOS).resize(original.size, Image.BILINEAR)
        sharp = edges(original.crop((x, y, x + width, y + height)))
        self.assertLess(edges(blurred.crop((x, y, x + width, y + height))), 0.5 * sharp)
        self.assertGreater(edges(shown), 0.8 * sharp, "the zoomed view is a blur, not its full-scale tiles")

    def test_video_shows_its_poster_and_plays_by_ranges(self) -> None:
        self.album("photos")
        index = self.browser.execute_script("return window.gallery.grid.items.findIndex((item) => item.name === 'v0.mp4')")
        self.assertGreaterEqual(index, 0)
        self.browser.execute_script("window.gallery.pager.open(arguments[0])", index)
        self.wait("const v = window.gallery.pager.stage.querySelector('video'); return v && v.poster.startsWith('blob:');",
                  "the video's poster")
        label = self.browser.execute_script("return window.gallery.pager.stage.querySelector('video').getAttribute('aria-label')")
        self.assertEqual(label, "Video v0.mp4")
        played = self.browser.execute_async_script("""
            const done = arguments[0], video = window.gallery.pager.stage.querySelector('video');
            video.muted = true;
            video.play().then(() => { const start = performance.now(), check = () => {
                if (video.currentTime > 1) done(video.currentTime);
                else if (performance.now() - start > 20000) done('stuck at ' + video.currentTime);
                else setTimeout(check, 50); }; check(); })
              .catch((error) => done('play failed: ' + error + ' ' + (video.error && video.error.message)));""")
        self.assertIsInstance(played, float, played)
        records = [record for record in self.origin.front.access_records() if record.get("target", "").startswith("/media/photos/v0.mp4")]
        self.assertTrue(records, "no /media/ request in the access log")
        self.assertIn("206", [record["status"] for record in records], records)
        self.browser.execute_script("window.gallery.pager.close()")


if __name__ == "__main__":
    unittest.main()
