#!/usr/bin/python3
"""README's screenshots of the web gallery (issue 34): a real viewerd and viewerd-http from the
build on loopback, serving FOLDER, shot in Debian's headless Chromium: the grid, the pager on
one photo, and that photo zoomed to full scale (its deep-zoom tiles).

    tools/gallery-screenshots.py FOLDER [--out docs/images] [--build-dir .build/debug]
                                 [--photo NAME] [--size 1280x800]

FOLDER: photographs (and videos) of your own; README's came from Debian's gnome-backgrounds
and plasma-workspace-wallpapers (bench/fetch-corpus.sh's originals). Writes gallery-grid.jpg,
gallery-pager.jpg and gallery-zoom.jpg."""
from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(REPO, "Tests", "HTTP"))
sys.path.insert(0, os.path.join(REPO, "Tests", "Browser"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--out", default=os.path.join(REPO, "docs", "images"))
    parser.add_argument("--build-dir", default=os.path.join(REPO, ".build", "debug"))
    parser.add_argument("--photo", help="the photo the pager opens and zooms (default: the largest)")
    parser.add_argument("--size", default="1280x800")
    arguments = parser.parse_args()
    os.environ["VIEWERD_BUILD_DIR"] = os.path.abspath(arguments.build_dir)
    width, height = (int(side) for side in arguments.size.split("x"))

    import http_support
    import test_gallery
    from PIL import Image

    test_gallery.WINDOW = (width, height)
    browser = test_gallery.chromium()
    work = tempfile.mkdtemp(prefix="viewerd-screenshots-")
    origin = http_support.Origin(work, {"photos": os.path.abspath(arguments.folder)}, ["--web-dir", os.path.join(REPO, "web")])
    os.makedirs(arguments.out, exist_ok=True)

    def wait(script: str, what: str, seconds: float = 120, *values):
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            value = browser.execute_script(script, *values)
            if value:
                return value
            time.sleep(0.1)
        raise SystemExit(f"gallery-screenshots: {what}: not within {seconds} s")

    def shot(name: str) -> None:
        time.sleep(0.5)  # the last image decoded and painted
        image = Image.open(io.BytesIO(browser.get_screenshot_as_png())).convert("RGB")
        path = os.path.join(arguments.out, name)
        image.save(path, quality=85, optimize=True)
        print(f"gallery-screenshots: {path} ({os.path.getsize(path) // 1024} KiB)")

    try:
        browser.get(f"http://127.0.0.1:{origin.front.port}/gallery/photos/")
        wait("return window.gallery && window.gallery.complete", "the layout")
        wait("const g = window.gallery.grid, view = g.scroller.getBoundingClientRect();"
             "return [...g.cells.values()].filter((c) => { const b = c.getBoundingClientRect();"
             " return b.bottom > view.top && b.top < view.bottom; })"
             ".every((c) => c.dataset.loaded && c.querySelector('img.thumb').complete);", "the first screen's thumbnails")
        shot("gallery-grid.jpg")

        index = browser.execute_script("""
            const items = window.gallery.grid.items, name = arguments[0];
            if (name) return items.findIndex((item) => item && item.name === name);
            let best = -1;
            items.forEach((item, i) => { if (item && item.kind === 'photo' && (best < 0 || item.width * item.height > items[best].width * items[best].height)) best = i; });
            return best;""", arguments.photo)
        if index < 0:
            raise SystemExit("gallery-screenshots: no such photo in the folder")
        browser.execute_script("window.gallery.pager.open(arguments[0])", index)
        wait("const p = window.gallery.pager, image = p.stage.querySelector('img.page');"
             "return p.screens.has(arguments[0]) && image && image.src === p.screens.get(arguments[0]) && image.complete;",
             "the pager's screen rendition", 120, index)
        shot("gallery-pager.jpg")

        browser.execute_script("window.gallery.pager.zoomTo(devicePixelRatio || 1, innerWidth * 0.6, innerHeight * 0.45)")
        wait("const z = window.gallery.pager.zoom; return z && z.complete;", "the zoomed view's tiles")
        shot("gallery-zoom.jpg")
    finally:
        browser.quit()
        origin.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
