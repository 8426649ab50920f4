#!/usr/bin/env python3
"""How soon a pager's page has an image when the grid's thumbnail of its photo is stored.

Makes N distinct 4000x3000 JPEGs, renders each into the grid's 256 box (stored), then swipes a
pager through them at RATE pages a second: each page a 2560x1440 RENDER, visible and
opportunistic, sent without waiting for the one before (the page two behind is cancelled, as
viewerd.Pager does). Prints the time from each RENDER to its first answer (the PREVIEW: the
grid's stored rendition, sent from the store) and to its RESULT, p50 and p95, and the daemon's
previews / previews_stored counters.

    python3 bench/pager-preview.py .build/release 60 3
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "python"))
import viewerd  # noqa: E402


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * (len(values) - 1) + 0.5))] if values else float("nan")


def main() -> None:
    build = sys.argv[1] if len(sys.argv) > 1 else ".build/debug"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 60
    rate = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
    work = tempfile.mkdtemp(prefix="viewerd-pager-")
    socket = os.path.join(work, "viewerd.sock")
    subprocess.run(["vips", "gaussnoise", work + "/n.v", "4000", "3000"], check=True)
    photos = []
    for i in range(n):
        path = f"{work}/p{i}.jpg"
        subprocess.run(["vips", "linear", work + "/n.v", path + "[Q=85]", "1", str(i % 97)], check=True)
        photos.append(path)
    daemon = subprocess.Popen([os.path.join(build, "viewerd"), "--config", "/dev/null", "--socket", socket,
                               "--cache-dir", work + "/cache"], stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if os.path.exists(socket):
                break
            time.sleep(0.05)
        client = viewerd.Client(socket)
        for path in photos:
            client.render(path, 256, 256)
        while client.stats().get("store_entries", 0) < 2 * n:  # the grid's renditions, written
            time.sleep(0.05)
        first, final, kinds = {}, {}, set()

        def page(i, request, asked):
            try:
                for event in request.events():
                    now = time.perf_counter()
                    if i not in first:
                        first[i] = (now - asked) * 1000
                        kinds.add((type(event).__name__, event.width, event.height))
                    if isinstance(event, viewerd.Result):
                        final[i] = (now - asked) * 1000
            except viewerd.Cancelled:
                pass

        threads, requests = [], {}
        start = time.perf_counter()
        for i, path in enumerate(photos):
            time.sleep(max(0.0, start + i / rate - time.perf_counter()))
            asked = time.perf_counter()
            requests[i] = client.start_render(path, 2560, 1440, priority="visible", delivery="opportunistic")
            thread = threading.Thread(target=page, args=(i, requests[i], asked))
            thread.start()
            threads.append(thread)
            if i >= 3:
                requests[i - 3].cancel()  # swiped past
        for thread in threads:
            thread.join()
        print(f"{n} pages at {rate:g}/s, first answers {sorted(kinds)}")
        print(f"RENDER to first image ms: p50 {percentile(first.values(), 0.5):.2f}  p95 {percentile(first.values(), 0.95):.2f}"
              f"  max {max(first.values()):.2f}  ({len(first)} pages)")
        print(f"RENDER to RESULT ms:      p50 {percentile(final.values(), 0.5):.1f}  p95 {percentile(final.values(), 0.95):.1f}"
              f"  ({len(final)} pages finished, the others swiped past)")
        stats = client.stats()
        print("previews", stats.get("previews"), "previews_stored", stats.get("previews_stored"))
        client.close()
    finally:
        daemon.terminate()
        daemon.wait()
        subprocess.run(["rm", "-rf", work])


if __name__ == "__main__":
    main()
