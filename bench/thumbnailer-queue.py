#!/usr/bin/python3
"""One Queue on a thumbnail service (org.freedesktop.thumbnails.Thumbnailer1), timed: what the
bench's Tumbler part (viewerd-bench --only tumbler, BENCHMARKS.md) drives Tumbler and
viewerd-thumbnailer with, each on a private bus. The client is clients/desktop/thumbnailer1.py
(GDBus, python3-gi: run it with Debian's /usr/bin/python3).

    /usr/bin/python3 bench/thumbnailer-queue.py --address ADDR [--flavor large]
        [--scheduler default] [--timeout S] FILE...

Every file is queued with its MIME type by its extension (image/jpeg, image/png, ...), as a file
manager passes it: Tumbler picks its thumbnailer by MIME type and answers "No thumbnailer
available" to an empty one. Prints, as JSON: the handle; the URIs Ready and in Error (code,
message); the URIs queued but never answered (`lost`) and those answered twice; whether
Finished came; and the seconds from the call to the Queue reply, the first Ready, the last
Ready or Error, and Finished. When the service leaves the bus before Finished (it crashed, or
was killed), it stops waiting and says when (`service_vanished`).
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "clients", "desktop"))
import thumbnailer1  # noqa: E402
from gi.repository import Gio  # noqa: E402

MIME_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png", ".webp": "image/webp",
              ".gif": "image/gif", ".tif": "image/tiff", ".tiff": "image/tiff", ".heic": "image/heif",
              ".avif": "image/avif"}


class TimedThumbnailer(thumbnailer1.Thumbnailer):
    """The client, with the arrival time of every signal."""

    def __init__(self, address):
        self.arrivals = []  # (member, handle, uris, monotonic time)
        super().__init__(address)

    def _signal(self, bus, sender, path, interface, member, parameters):
        super()._signal(bus, sender, path, interface, member, parameters)
        args = parameters.unpack()
        self.arrivals.append((member, args[0], list(args[1]) if member in ("Ready", "Error") else [], time.monotonic()))


def main(argv):
    parser = argparse.ArgumentParser(description="Queue files on a thumbnail service and time the answers.")
    parser.add_argument("--address", help="a D-Bus address instead of the session bus")
    parser.add_argument("--flavor", default="large")
    parser.add_argument("--scheduler", default="default")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("files", nargs="+")
    options = parser.parse_args(argv)
    uris = [thumbnailer1.uri(f) for f in options.files]
    mime_types = [MIME_TYPES.get(os.path.splitext(f)[1].lower(), "") for f in options.files]
    client = TimedThumbnailer(options.address)

    # A service that leaves the bus (it crashed, or was killed) will never finish: stop then.
    vanished = []
    client.bus.signal_subscribe("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
                                thumbnailer1.NAME, Gio.DBusSignalFlags.NONE,
                                lambda *a: vanished.append(time.monotonic()) if not a[5].unpack()[2] else None)

    start = time.monotonic()
    handle = client.queue(uris, mime_types, flavor=options.flavor, scheduler=options.scheduler)
    replied = time.monotonic()
    client.pump(lambda: client.finished(handle) or bool(vanished), options.timeout)
    result = client.outcome(handle)
    ended = time.monotonic()

    mine = [a for a in client.arrivals if a[1] == handle]
    answers = [(uri, t) for member, _, answered, t in mine if member in ("Ready", "Error") for uri in answered]
    ready_times = [t for member, _, answered, t in mine if member == "Ready"]
    finished = [t for member, _, _, t in mine if member == "Finished"]
    counts = {}
    for uri, _ in answers:
        counts[uri] = counts.get(uri, 0) + 1

    def since(t):
        return round(t - start, 4) if t is not None else None

    result.update({
        "queued": len(uris),
        "ready_count": len(set(result["ready"])),
        "lost": [u for u in uris if u not in counts],
        "answered_twice": sorted(u for u, n in counts.items() if n > 1),
        "unasked": sorted(set(counts) - set(uris)),
        "seconds_reply": since(replied),
        "seconds_first_ready": since(min(ready_times) if ready_times else None),
        "seconds_last_answer": since(max(t for _, t in answers) if answers else None),
        "seconds_finished": since(finished[0] if finished else None),
        "seconds_waited": since(ended),
        "service_vanished": since(vanished[0]) if vanished else None,
    })
    del result["ready"]  # the URIs themselves: `lost` and `errors` say what is missing
    client.close()
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
