#!/usr/bin/env python3
"""The "browser" part of `make bench` (issue 34's goals): the web gallery in Debian's headless
Chromium against a release viewerd and viewerd-http on loopback, beside the same page and the
same JavaScript served as static files by Debian's nginx.

An album of 10,000 photos (copies of 60 generated JPEGs of six sizes, kept in
${XDG_CACHE_HOME:-~/.cache}/viewerd-browser-bench between runs). The browser's cache is off
(CDP Network.setCacheDisabled), so every load is served by the front or nginx.

1. First screen: from the page's first paint to the placeholders (the mark
   "gallery-placeholders") and to every visible cell's thumbnail loaded; cold (a fresh daemon
   store) once, then warm (the page loaded again) three times, median.
2. Fast scroll at 40 items/s for 20 s from item 2,000 (thumbnails not rendered yet): every
   frame (rAF), the visible cells without even their placeholder and those with their
   thumbnail; the shown cells that got their thumbnail during the scroll beside the daemon's
   `renders` over it (STATS), as the native bench's fast scroll compares them.
3. The pager at 3 pages/s over 50 pages in the scrolled range: an image on the page the
   frame after each turn, and the time to the screen-sized rendition.
4. Long tasks (PerformanceObserver "longtask") during 2 and 3; the JS heap after a forced GC
   (CDP Performance.getMetrics) before and after a 10,000-item scroll.
5. The baseline: every URL the page asks in 1 and 2 fetched once through viewerd-http and
   written under an nginx root at the same paths (layout windows by their offset and limit),
   nginx on loopback; 1 (warm) and 2 run against it. viewerd's warm figures beside nginx's.

Prints a table (goals met or MISS, never asserted), writes bench-results/browser-<time>.json
and exits 0.

    /usr/bin/python3 bench/browser-bench.py --build-dir .build/release
"""
from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "Tests", "HTTP"))
import http_support  # noqa: E402 (Tests/HTTP: the origin and nginx as the tests start them)

ROOT = "album"
ALBUM_SIZE = 10_000
# Six shapes of camera and phone photos, ten variants of each.
SIZES = [(1600, 1200), (1200, 1600), (2048, 1152), (1152, 2048), (1500, 1500), (2400, 1600)]
WINDOW = (1280, 800)
SCROLL_START = 2000
SCROLL_RATE = 40.0
SCROLL_SECONDS = 20.0
PAGER_OFFSET = 200  # pages from the scroll's start: photos the grid has shown
PAGER_PAGES = 50
PAGER_RATE = 3.0
HEAP_ITEMS = 10_000
HEAP_RATE = 250.0
WARM_LOADS = 3

# Installed before the page's own scripts on every load: the long tasks, a watch for the first
# screen's thumbnails, and the drivers of the scroll and the pager (run by execute_async_script).
PAGE_PROBE = r"""
window.__bench = { longtasks: [], thumbnails: null };
performance.setResourceTimingBufferSize(100000);
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) window.__bench.longtasks.push([entry.startTime, entry.duration]);
}).observe({ type: "longtask", buffered: true });

// The cells in the scroller's view, from the cells the grid has placed.
window.__benchVisibleCells = () => {
  const grid = window.gallery.grid, view = grid.scroller.getBoundingClientRect();
  return [...grid.cells.values()].filter((cell) => {
    const box = cell.getBoundingClientRect();
    return box.bottom > view.top && box.top < view.top + grid.scroller.clientHeight;
  });
};
const hasThumbnail = (cell) => {
  const image = cell.dataset.loaded && cell.querySelector("img.thumb");
  return Boolean(image && image.complete && image.naturalWidth);
};
window.__benchVisibleLoaded = () => {
  const cells = window.__benchVisibleCells();
  return cells.length > 0 && cells.every(hasThumbnail);
};
(function watch() {
  if (window.gallery && window.gallery.grid && window.gallery.grid.cells.size && window.__benchVisibleLoaded()) {
    window.__bench.thumbnails = performance.now();
    window.__bench.firstScreenCells = window.__benchVisibleCells().length;
    return;
  }
  requestAnimationFrame(watch);
})();

// Scrolls the grid `rate` items a second for `seconds` from where it is. Each frame samples
// what the previous frame painted: the visible cells by the layout (a cell the grid has not
// placed counts as blank), those without a placeholder or thumbnail, those with a thumbnail.
window.__benchScroll = async (rate, seconds) => {
  const { rowAt } = await import("/gallery/assets/layout.js");
  const GAP = 4;
  const grid = window.gallery.grid, layout = grid.layout, loader = window.gallery.loader;
  const perItem = layout.height / grid.total;
  const startY = grid.contentTop;
  const before = new Set(grid.thumbs.keys());
  const withThumbnail = new Set();
  const loadedBefore = loader.stats.loaded, abortedBefore = loader.stats.aborted;
  const frames = [];
  const sample = (now) => {
    const view = grid.scroller.clientHeight, top = grid.contentTop;
    let shown = 0, blank = 0, thumbs = 0;
    for (let row = rowAt(layout, top - GAP); row < layout.rowTop.length && layout.rowTop[row] + GAP < top + view; row++) {
      const end = row + 1 < layout.rowStart.length ? layout.rowStart[row + 1] : grid.total;
      for (let index = layout.rowStart[row]; index < end; index++) {
        shown++;
        const cell = grid.cells.get(index);
        if (!cell || (!cell.classList.contains("painted") && !cell.dataset.loaded)) { blank++; continue; }
        if (hasThumbnail(cell)) {
          thumbs++;
          if (!before.has(index)) withThumbnail.add(index);
        }
      }
    }
    const own = grid.sample();
    frames.push({ t: now, shown, blank, thumbs, gridBlank: own.blank });
  };
  return new Promise((resolve) => {
    let start = null;
    const step = (now) => {
      if (start === null) start = now; else sample(now);
      const t = (now - start) / 1000;
      if (t >= seconds) {
        resolve({ start, end: now, frames, shownWithNewThumbnail: withThumbnail.size,
                  loaded: loader.stats.loaded - loadedBefore, aborted: loader.stats.aborted - abortedBefore,
                  items: rate * t });
        return;
      }
      grid.scrollToContent(startY + rate * t * perItem);
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  });
};

// Opens the pager at `first` and turns `pages` pages at `rate` a second, each turn in a frame;
// watches every frame for the page's image and for its screen-sized rendition.
window.__benchPager = (first, pages, rate) => {
  const pager = window.gallery.pager;
  const results = [];
  let current = null, turned = 0, next = 0;
  return new Promise((resolve) => {
    const step = (now) => {
      if (current) {
        current.frames++;
        const image = pager.stage.querySelector("img.page");
        const shown = Boolean(image && image.getAttribute("src") && image.complete && image.naturalWidth);
        if (shown && current.imageFrame === null) current.imageFrame = current.frames;
        const screen = pager.screens.get(current.index);
        if (current.sharp === null && screen && image && image.src === screen && image.complete && image.naturalWidth) current.sharp = now - current.at;
      }
      if (turned === 0 || now >= next) {
        if (turned === pages) {
          resolve({ start: results[0].at, end: now, pages: results });
          return;
        }
        const index = first + turned;
        if (turned === 0) { pager.open(index); next = now; } else pager.go(index);
        current = { index, at: now, frames: 0, imageFrame: null, sharp: null };
        results.push(current);
        next += 1000 / rate;
        turned++;
      }
      requestAnimationFrame(step);
    };
    requestAnimationFrame(step);
  });
};
"""


def log(text: str) -> None:
    print(f"browser-bench: {text}", flush=True)


def percentile(values: List[float], q: float) -> Optional[float]:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else None


# The album ------------------------------------------------------------------------------------

def make_album(cache: str) -> str:
    """The 10,000-photo album, made once: 60 JPEGs by vips (noise blurred into something a JPEG
    compresses as a photo, 0.2 to 0.5 MB), then copied by name."""
    album = os.path.join(cache, f"{ROOT}-{ALBUM_SIZE}")
    done = album + ".complete"
    if os.path.exists(done):
        return album
    sources = os.path.join(cache, "sources")
    os.makedirs(sources, exist_ok=True)
    log(f"making the album in {cache} (once)")
    originals = []
    with tempfile.TemporaryDirectory(prefix="viewerd-browser-bench-") as scratch:
        for shape, (width, height) in enumerate(SIZES):
            noise = os.path.join(scratch, f"noise-{shape}.v")
            grey = os.path.join(scratch, f"grey-{shape}.v")
            colour = os.path.join(scratch, f"colour-{shape}.v")
            subprocess.run(["vips", "gaussnoise", noise, str(width), str(height), "--sigma", "25"], check=True)
            subprocess.run(["vips", "linear", noise, grey, "1", "0", "--uchar"], check=True)
            subprocess.run(["vips", "bandjoin", f"{grey} {grey} {grey}", colour], check=True)
            blurred = os.path.join(scratch, f"blurred-{shape}.v")
            subprocess.run(["vips", "gaussblur", colour, blurred, "2.5"], check=True)
            for variant in range(10):
                path = os.path.join(sources, f"s{shape}-{variant}.jpg")
                gains = f"{1.2 + variant * 0.05} {1.0 + (variant % 3) * 0.1} {0.8 + (variant % 5) * 0.08}"
                offsets = f" {-40 + variant * 6} {-20 + variant * 3} {variant * 4}"
                subprocess.run(["vips", "linear", blurred, f"{path}[Q=85]", gains, offsets, "--uchar"], check=True)
                originals.append(path)
    shutil.rmtree(album, ignore_errors=True)
    os.makedirs(album)
    for i in range(ALBUM_SIZE):
        shutil.copyfile(originals[(i * 7) % len(originals)], os.path.join(album, f"p{i:05}.jpg"))
    open(done, "w").close()
    return album


# The browser ----------------------------------------------------------------------------------

def chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    for argument in ["--headless=new", "--no-sandbox", "--disable-gpu", f"--window-size={WINDOW[0]},{WINDOW[1]}",
                     "--force-device-scale-factor=1", "--disable-background-timer-throttling",
                     "--disable-renderer-backgrounding", "--disable-backgrounding-occluded-windows"]:
        options.add_argument(argument)
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    browser = webdriver.Chrome(service=Service(shutil.which("chromedriver") or "/usr/bin/chromedriver"), options=options)
    browser.set_script_timeout(600)
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": PAGE_PROBE})
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setCacheDisabled", {"cacheDisabled": True})
    browser.execute_cdp_cmd("Performance.enable", {})
    return browser


def wait(browser, script: str, what: str, seconds: float):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = browser.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise RuntimeError(f"{what}: not within {seconds} s")


def first_screen(browser, url: str) -> Dict[str, float]:
    """Loads the album page and times its first screen from the first paint."""
    browser.get(url)
    wait(browser, "return window.__bench && window.__bench.thumbnails !== null", "the first screen's thumbnails", 300)
    times = browser.execute_script("""
        const paint = performance.getEntriesByType("paint");
        const first = paint.find((e) => e.name === "first-paint") || paint[0];
        const mark = performance.getEntriesByName("gallery-placeholders")[0];
        return { firstPaint: first ? first.startTime : null, placeholders: mark ? mark.startTime : null,
                 thumbnails: window.__bench.thumbnails, cells: window.__bench.firstScreenCells,
                 // Where the time goes: the image requests answered by then (start, end, duration).
                 requests: performance.getEntriesByType("resource")
                   .filter((e) => new URL(e.name).pathname.startsWith("/iiif/") && e.responseEnd <= window.__bench.thumbnails)
                   .map((e) => [e.startTime, e.responseEnd, e.responseEnd - e.startTime]),
                 layout: performance.getEntriesByType("resource").filter((e) => e.name.includes("/gallery/api/layout/"))
                   .map((e) => [e.startTime, e.responseEnd, new URL(e.name).searchParams.get("limit")]) };""")
    layout = times.pop("layout")
    if layout:
        times["firstLayoutRequest"] = layout[0][1] - layout[0][0]
        times["firstLayoutWindow"] = int(layout[0][2])
    requests = times.pop("requests")
    if requests:
        times["imageRequests"] = len(requests)
        times["firstImageRequestAfterPaint"] = min(r[0] for r in requests) - times["firstPaint"]
        times["imageRequestP50"] = percentile([r[2] for r in requests], 0.5)
    times["placeholdersAfterPaint"] = times["placeholders"] - times["firstPaint"]
    times["thumbnailsAfterPaint"] = times["thumbnails"] - times["firstPaint"]
    return times


def load_whole(browser, url: str) -> None:
    browser.get(url)
    wait(browser, "return window.gallery && window.gallery.complete", "the whole layout", 600)


def jump(browser, index: int) -> None:
    """The grid at `index`, its visible thumbnails loaded (where a user arrived)."""
    browser.execute_script("window.gallery.grid.scrollToIndex(arguments[0]); window.gallery.grid.update();", index)
    wait(browser, "return window.__benchVisibleLoaded()", f"the thumbnails at item {index}", 120)


def long_tasks(browser, start: float, end: float) -> List[List[float]]:
    return [task for task in browser.execute_script("return window.__bench.longtasks") if start <= task[0] <= end]


def heap(browser) -> Dict[str, float]:
    browser.execute_cdp_cmd("HeapProfiler.collectGarbage", {})
    metrics = {m["name"]: m["value"] for m in browser.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
    return {"jsHeapUsed": metrics["JSHeapUsedSize"], "nodes": metrics["Nodes"]}


def scroll(browser, rate: float, seconds: float) -> Dict:
    run = browser.execute_async_script("window.__benchScroll(arguments[0], arguments[1]).then(arguments[2]);", rate, seconds)
    frames = run.pop("frames")
    intervals = [b["t"] - a["t"] for a, b in zip(frames, frames[1:])]
    run["frames"] = len(frames)
    run["blankFrames"] = sum(1 for f in frames if f["blank"])
    run["gridSampleBlankFrames"] = sum(1 for f in frames if f["gridBlank"])
    run["blankCells"] = sum(f["blank"] for f in frames)
    run["shownCells"] = sum(f["shown"] for f in frames)
    run["thumbnailShare"] = sum(f["thumbs"] for f in frames) / max(1, run["shownCells"])
    run["frameIntervalP50"] = percentile(intervals, 0.5)
    run["frameIntervalP95"] = percentile(intervals, 0.95)
    run["seconds"] = (run["end"] - run["start"]) / 1000
    run["longTasks"] = long_tasks(browser, run["start"], run["end"])
    return run


# The static snapshot and nginx ----------------------------------------------------------------

def layout_file(target: str) -> str:
    """The file of a layout window's URL: its query by name, as nginx's try_files finds it."""
    path, _, query = target.partition("?")
    args = dict(urllib.parse.parse_qsl(query))
    return f"{urllib.parse.unquote(path)}/{args['offset']}-{args['limit']}-{args['order']}.json"


def snapshot(port: int, targets: List[str], directory: str) -> Dict[str, int]:
    """Every target fetched once through viewerd-http and written under `directory` at its path
    (decoded, as nginx maps $uri to a file)."""

    def fetch(target: str) -> int:
        status, _, body = http_support.get(port, target, timeout=300)
        if status != 200:
            raise RuntimeError(f"{target}: {status} from viewerd-http")
        if "/gallery/api/layout/" in target:
            relative = layout_file(target)
        else:
            relative = urllib.parse.unquote(target.partition("?")[0])
            if relative.endswith("/"):
                relative += "index.html"
        path = os.path.join(directory, relative.lstrip("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(body)
        return len(body)

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        sizes = list(pool.map(fetch, targets))
    return {"files": len(sizes), "bytes": sum(sizes)}


class StaticNginx(http_support.NginxProcess):
    """Debian's nginx in the foreground with a prefix of its own (as Tests/HTTP/test_nginx.py
    starts it), serving `root` on a loopback port: as many workers as cores, no access log."""

    def __init__(self, directory: str, root: str) -> None:
        super().__init__(directory)
        self.start(lambda port: self._configure(port, root))

    def _configure(self, port: int, root: str) -> None:
        d = self.directory
        with open(os.path.join(d, "nginx.conf"), "w", encoding="utf-8") as f:
            f.write(f"""{self.user_line()}worker_processes {os.cpu_count() or 1};
pid {d}/nginx.pid;
error_log {d}/error.log notice;
events {{ worker_connections 256; }}
http {{
    include /etc/nginx/mime.types;
    access_log off;
    sendfile on;
    tcp_nopush on;
{self.temporary_paths()}    server {{
        listen 127.0.0.1:{port};
        root {root};
        index index.html;
        # A layout window is the file named by its query (bench/browser-bench.py, layout_file).
        location /gallery/api/layout/ {{
            try_files $uri/$arg_offset-$arg_limit-$arg_order.json =404;
        }}
    }}
}}
""")


def median_loads(browser, url: str, runs: int) -> Dict:
    loads = [first_screen(browser, url) for _ in range(runs)]
    return {"runs": loads,
            "placeholdersAfterPaint": statistics.median(l["placeholdersAfterPaint"] for l in loads),
            "thumbnailsAfterPaint": statistics.median(l["thumbnailsAfterPaint"] for l in loads)}


def page_targets(browser, ranges: List[List[int]]) -> List[str]:
    """The URLs the page asks: the page and its assets, the layout windows it fetched, and the
    thumbnail URL the grid asks for every item of `ranges` (by its own bucket and iiif
    functions), with any other image it fetched."""
    return browser.execute_async_script("""
        const [ranges, done] = arguments;
        import("/gallery/assets/loader.js").then(({ bucket, iiif }) => {
          const grid = window.gallery.grid, layout = grid.layout, urls = new Set();
          for (const [from, to] of ranges) {
            for (let index = Math.max(0, from); index < Math.min(grid.total, to); index++) {
              const item = grid.items[index];
              const side = Math.max(layout.w[index], layout.rowHeight[layout.row[index]]);
              urls.add(iiif(item, bucket(Math.ceil(side * (window.devicePixelRatio || 1)))));
            }
          }
          for (const entry of performance.getEntriesByType("resource")) {
            const url = new URL(entry.name);
            if (url.pathname.startsWith("/gallery/api/layout/") || url.pathname.startsWith("/iiif/")) urls.add(url.pathname + url.search);
          }
          done([...urls]);
        });""", ranges)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-dir", default=os.path.join(REPO, ".build", "release"))
    parser.add_argument("--cache", default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                         "viewerd-browser-bench"))
    parser.add_argument("--results", default=os.path.join(REPO, "bench-results"))
    parser.add_argument("--smoke", action="store_true", help="a 600-item album and short runs: the harness only, no figures")
    arguments = parser.parse_args()
    if arguments.smoke:
        global ALBUM_SIZE, SCROLL_START, SCROLL_SECONDS, PAGER_OFFSET, PAGER_PAGES, HEAP_ITEMS
        ALBUM_SIZE, SCROLL_START, SCROLL_SECONDS, PAGER_OFFSET, PAGER_PAGES, HEAP_ITEMS = 600, 200, 3.0, 40, 6, 500
    os.environ["VIEWERD_BUILD_DIR"] = os.path.abspath(arguments.build_dir)
    import viewerd

    began = time.monotonic()
    album = make_album(arguments.cache)
    work = tempfile.mkdtemp(prefix="viewerd-browser-bench-")
    origin = browser = nginx = None
    result: Dict = {"machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg()},
                    "album": {"items": ALBUM_SIZE, "path": album}, "window": WINDOW}
    try:
        origin = http_support.Origin(os.path.join(work, "origin"), {ROOT: album}, ["--web-dir", os.path.join(REPO, "web")])
        client = viewerd.Client(origin.daemon.socket)
        browser = chromium()
        page = f"http://127.0.0.1:{origin.front.port}/gallery/{ROOT}/"

        log("1. first screen, cold (a fresh store)")
        result["coldFirstScreen"] = first_screen(browser, page)
        wait(browser, "return window.gallery.complete", "the whole layout", 600)
        log("1. first screen, warm")
        result["warmFirstScreen"] = median_loads(browser, page, WARM_LOADS)

        log(f"2. fast scroll at {SCROLL_RATE:g} items/s for {SCROLL_SECONDS:g} s from item {SCROLL_START}")
        load_whole(browser, page)
        jump(browser, SCROLL_START)
        before = client.stats()
        run = scroll(browser, SCROLL_RATE, SCROLL_SECONDS)
        after = client.stats()
        for name in ("renders", "cancelled_queued", "cancelled_running", "hits"):
            run[f"daemon_{name}"] = after.get(name, 0) - before.get(name, 0)
        run["shownPerRender"] = run["shownWithNewThumbnail"] / max(1, run["daemon_renders"])
        result["coldScroll"] = run

        log(f"3. pager at {PAGER_RATE:g} pages/s over {PAGER_PAGES} pages")
        # As the native swipe: the pages' grid thumbnails there first (the grid at the first
        # page, every load it asked done).
        jump(browser, SCROLL_START + PAGER_OFFSET)
        wait(browser, "const l = window.gallery.loader; return !l.running.size && !l.waiting.size", "the grid's loads", 120)
        with_thumbnail = browser.execute_script(
            "return [...Array(arguments[1]).keys()].filter((i) => window.gallery.grid.thumbs.has(arguments[0] + i)).length",
            SCROLL_START + PAGER_OFFSET, PAGER_PAGES)
        pager = browser.execute_async_script("window.__benchPager(arguments[0], arguments[1], arguments[2]).then(arguments[3]);",
                                             SCROLL_START + PAGER_OFFSET, PAGER_PAGES, PAGER_RATE)
        pages = pager["pages"]
        # A page left before its rendition came counts as infinitely late (null in the JSON).
        sharp = [p["sharp"] if p["sharp"] is not None else float("inf") for p in pages]
        finite = lambda value: None if value == float("inf") else value  # noqa: E731
        result["pager"] = {"pages": pages, "gridThumbnails": with_thumbnail, "imageWithinOneFrame": sum(1 for p in pages if p["imageFrame"] == 1),
                           "imageEver": sum(1 for p in pages if p["imageFrame"] is not None),
                           "sharpP50": finite(percentile(sharp, 0.5)), "sharpP95": finite(percentile(sharp, 0.95)),
                           "neverSharp": sum(1 for p in pages if p["sharp"] is None),
                           "longTasks": long_tasks(browser, pager["start"], pager["end"])}

        log(f"4. JS heap over a {HEAP_ITEMS}-item scroll at {HEAP_RATE:g} items/s")
        load_whole(browser, page)
        start = heap(browser)
        run = scroll(browser, HEAP_RATE, HEAP_ITEMS / HEAP_RATE)
        end = heap(browser)
        result["heap"] = {"start": start, "end": end, "growthMB": (end["jsHeapUsed"] - start["jsHeapUsed"]) / 1e6,
                          "blankFrames": run["blankFrames"], "frames": run["frames"], "longTasks": run["longTasks"]}

        log("5. the static snapshot for nginx")
        last = SCROLL_START + int(SCROLL_RATE * SCROLL_SECONDS)
        targets = page_targets(browser, [[0, 400], [SCROLL_START - 200, last + 400]])
        web = os.path.join(REPO, "web", "gallery")
        targets += [f"/gallery/{ROOT}/"] + [f"/gallery/assets/{name}" for name in sorted(os.listdir(web)) if name != "README.md"]
        static = os.path.join(work, "static")
        result["snapshot"] = snapshot(origin.front.port, sorted(set(targets)), static)

        log("2. fast scroll, warm (every thumbnail stored)")
        load_whole(browser, page)
        jump(browser, SCROLL_START)
        result["warmScroll"] = scroll(browser, SCROLL_RATE, SCROLL_SECONDS)

        nginx = StaticNginx(os.path.join(work, "nginx"), static)
        static_page = f"http://127.0.0.1:{nginx.port}/gallery/{ROOT}/"
        log("5. nginx: first screen")
        result["nginxFirstScreen"] = median_loads(browser, static_page, WARM_LOADS)
        log("5. nginx: fast scroll")
        load_whole(browser, static_page)
        jump(browser, SCROLL_START)
        result["nginxScroll"] = scroll(browser, SCROLL_RATE, SCROLL_SECONDS)
        errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        result["consoleErrors"] = errors[:20]
    finally:
        if browser is not None:
            browser.quit()
        if nginx is not None:
            nginx.stop()
        if origin is not None:
            origin.stop()
        shutil.rmtree(work, ignore_errors=True)
    result["seconds"] = time.monotonic() - began
    report(result, arguments.results)
    return 0


def report(result: Dict, directory: str) -> None:
    rows = []

    def row(figure, viewerd, baseline="", ratio="", goal="", met=None):
        rows.append((figure, viewerd, baseline, ratio, goal, "" if met is None else ("met" if met else "MISS")))

    ms = lambda value: "∞" if value is None or value == float("inf") else f"{value:,.0f} ms"  # noqa: E731
    cold, warm, static = result["coldFirstScreen"], result["warmFirstScreen"], result["nginxFirstScreen"]
    goals = {}
    goals["cold placeholders"] = cold["placeholdersAfterPaint"] <= 100
    row("first screen, cold: placeholders after first paint", ms(cold["placeholdersAfterPaint"]), goal="≤ 100 ms", met=goals["cold placeholders"])
    goals["cold thumbnails"] = cold["thumbnailsAfterPaint"] <= 1000
    row(f"first screen, cold: its {cold['cells']} thumbnails after first paint", ms(cold["thumbnailsAfterPaint"]), goal="≤ 1 s", met=goals["cold thumbnails"])
    goals["warm placeholders"] = warm["placeholdersAfterPaint"] <= 100
    row("first screen, warm: placeholders after first paint (median of 3)", ms(warm["placeholdersAfterPaint"]),
        f"nginx {ms(static['placeholdersAfterPaint'])}", ratio_text(warm["placeholdersAfterPaint"], static["placeholdersAfterPaint"]),
        "≤ 100 ms", goals["warm placeholders"])
    goals["warm thumbnails"] = warm["thumbnailsAfterPaint"] <= 150
    row("first screen, warm: thumbnails after first paint (median of 3)", ms(warm["thumbnailsAfterPaint"]),
        f"nginx {ms(static['thumbnailsAfterPaint'])}", ratio_text(warm["thumbnailsAfterPaint"], static["thumbnailsAfterPaint"]),
        "≤ 150 ms", goals["warm thumbnails"])
    row(f"first screen, cold: the first layout window's request ({cold.get('firstLayoutWindow')} items); image request p50",
        f"{ms(cold.get('firstLayoutRequest'))}; {ms(cold.get('imageRequestP50'))}")
    row("first screen, warm (last load): first image request after paint; image request p50",
        f"{ms(warm['runs'][-1].get('firstImageRequestAfterPaint'))}; {ms(warm['runs'][-1].get('imageRequestP50'))}",
        f"nginx {ms(static['runs'][-1].get('firstImageRequestAfterPaint'))}; {ms(static['runs'][-1].get('imageRequestP50'))}")
    scroll, warm_scroll, static_scroll = result["coldScroll"], result["warmScroll"], result["nginxScroll"]
    goals["scroll blank"] = scroll["blankFrames"] == 0 and warm_scroll["blankFrames"] == 0
    row(f"fast scroll {SCROLL_RATE:g} items/s, cold: frames with a visible blank cell", f"{scroll['blankFrames']} of {scroll['frames']}",
        goal="0", met=scroll["blankFrames"] == 0)
    row("fast scroll, cold: shown cells' share with their thumbnail", f"{scroll['thumbnailShare']:.2f}")
    goals["scroll throughput"] = scroll["shownPerRender"] >= 0.9
    row("fast scroll, cold: shown cells given their thumbnail / daemon renders",
        f"{scroll['shownWithNewThumbnail']} / {scroll['daemon_renders']}", ratio=f"{scroll['shownPerRender']:.2f}", goal="≥ 0.9",
        met=goals["scroll throughput"])
    row("fast scroll, cold: thumbnails loaded / s; daemon renders / s",
        f"{scroll['loaded'] / scroll['seconds']:.1f}; {scroll['daemon_renders'] / scroll['seconds']:.1f}")
    row("fast scroll, warm: frames with a visible blank cell", f"{warm_scroll['blankFrames']} of {warm_scroll['frames']}",
        f"nginx {static_scroll['blankFrames']} of {static_scroll['frames']}", goal="0", met=warm_scroll["blankFrames"] == 0)
    row("fast scroll, warm: shown cells' share with their thumbnail", f"{warm_scroll['thumbnailShare']:.2f}",
        f"nginx {static_scroll['thumbnailShare']:.2f}", ratio_text(warm_scroll["thumbnailShare"], static_scroll["thumbnailShare"]))
    row("fast scroll: frame interval p50 / p95 (cold; warm; nginx)",
        f"{scroll['frameIntervalP50']:.1f} / {scroll['frameIntervalP95']:.1f} ms; "
        f"{warm_scroll['frameIntervalP50']:.1f} / {warm_scroll['frameIntervalP95']:.1f} ms",
        f"{static_scroll['frameIntervalP50']:.1f} / {static_scroll['frameIntervalP95']:.1f} ms")
    pager = result["pager"]
    goals["pager image"] = pager["imageWithinOneFrame"] == PAGER_PAGES
    row(f"pager {PAGER_RATE:g} pages/s: pages with an image the frame after the turn", f"{pager['imageWithinOneFrame']} of {PAGER_PAGES}"
        f" ({pager['gridThumbnails']} with the grid's thumbnail)",
        goal=f"{PAGER_PAGES}", met=goals["pager image"])
    goals["pager sharp"] = pager["sharpP95"] is not None and pager["sharpP95"] <= 300
    row("pager: screen-sized rendition p50 / p95", f"{ms(pager['sharpP50'])} / {ms(pager['sharpP95'])}"
        + (f" ({pager['neverSharp']} pages left before it came)" if pager["neverSharp"] else ""), goal="p95 ≤ 300 ms", met=goals["pager sharp"])
    tasks = scroll["longTasks"] + pager["longTasks"]
    goals["long tasks"] = not tasks
    row("long tasks (> 50 ms) during the cold scroll and the pager",
        f"{len(tasks)}" + (f", longest {max(t[1] for t in tasks):.0f} ms" if tasks else ""), goal="none", met=goals["long tasks"])
    heap = result["heap"]
    goals["heap"] = heap["growthMB"] < 20
    row(f"JS heap after GC over a {HEAP_ITEMS:,}-item scroll", f"{heap['start']['jsHeapUsed'] / 1e6:.1f} → {heap['end']['jsHeapUsed'] / 1e6:.1f} MB "
        f"({heap['growthMB']:+.1f}); DOM nodes {heap['start']['nodes']:.0f} → {heap['end']['nodes']:.0f}", goal="< +20 MB", met=goals["heap"])
    result["goals"] = goals
    widths = [max(len(str(r[i])) for r in rows + [HEADER]) for i in range(len(HEADER))]
    print()
    for line in [HEADER] + rows:
        print(" | ".join(str(cell).ljust(width) for cell, width in zip(line, widths)))
    print(f"\nbrowser-bench: {sum(goals.values())} of {len(goals)} goals met; snapshot {result['snapshot']['files']} files; "
          f"{result['seconds']:.0f} s; load average at start {result['machine']['load_average'][0]:.1f}")
    if result["consoleErrors"]:
        print(f"browser-bench: {len(result['consoleErrors'])} console errors, the first: {result['consoleErrors'][0]['message']}")
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"browser-{datetime.datetime.now(datetime.timezone.utc).strftime('%Y-%m-%dT%H%M%SZ')}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1, default=str)
    print(f"browser-bench: {path}")


HEADER = ("figure", "viewerd", "nginx (static)", "ratio", "goal", "")


def ratio_text(value: float, baseline: float) -> str:
    return f"{value / baseline:.2f}" if baseline and baseline > 0 else "n/a"


if __name__ == "__main__":
    sys.exit(main())
