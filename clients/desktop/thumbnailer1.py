#!/usr/bin/env python3
"""A client of the freedesktop thumbnail service (org.freedesktop.thumbnails.Thumbnailer1),
through GLib's GDBus (python3-gi), the library Thunar's and GNOME's apps use: what the
conformance tests (Tests/Desktop) and the bench's Tumbler comparison drive viewerd-thumbnailer
and Tumbler with.

    /usr/bin/python3 clients/desktop/thumbnailer1.py [--address ADDR] [--flavor large]
        [--scheduler default] [--timeout S] FILE...

queues the files in one Queue, each with its MIME type as a file manager passes it (GIO's
guess by name: Tumbler picks its thumbnailer by it and answers "No thumbnailer available" to an
empty one), waits for Finished, and prints, as JSON: the handle; the URIs Ready and in Error
(code, message); those queued but never answered (`lost`) and those answered twice; whether
Finished came; and the seconds from the call to the Queue's reply, the first Ready, the last
Ready or Error, and Finished. When the service leaves the bus first (it crashed, or was
killed), it stops waiting and says when (`service_vanished`). Exit 1 unless every file was
Ready. (Debian's python3, which has python3-gi.)
"""
import json
import os
import sys
import time

import gi

gi.require_version("Gio", "2.0")
from gi.repository import Gio, GLib  # noqa: E402

NAME = "org.freedesktop.thumbnails.Thumbnailer1"
PATH = "/org/freedesktop/thumbnails/Thumbnailer1"
CACHE_NAME = "org.freedesktop.thumbnails.Cache1"
CACHE_PATH = "/org/freedesktop/thumbnails/Cache1"


def uri(path):
    """The file:// URI of a path, escaped as GLib (and so every desktop app) escapes it."""
    return GLib.filename_to_uri(os.path.abspath(path), None)


class Thumbnailer:
    """One connection to the bus: queues, dequeues, and records every signal sent to it."""

    def __init__(self, address=None):
        # A connection of its own (not GLib's shared one), so that two clients are two callers.
        address = address or Gio.dbus_address_get_for_bus_sync(Gio.BusType.SESSION, None)
        flags = Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION
        self.bus = Gio.DBusConnection.new_for_address_sync(address, flags, None, None)
        self.context = GLib.MainContext.default()
        self.signals = []  # (member, args) in arrival order
        self.arrived = []  # the monotonic time of each of `signals`
        self.subscription = self.bus.signal_subscribe(None, NAME, None, PATH, None, Gio.DBusSignalFlags.NONE,
                                                      self._signal)

    def _signal(self, _bus, _sender, _path, _interface, member, parameters):
        args = parameters.unpack()
        self.signals.append((member, args))
        self.arrived.append(time.monotonic())

    def call(self, method, signature, args, reply=None, name=NAME, path=PATH, timeout_ms=60000):
        value = self.bus.call_sync(name, path, name, method, GLib.Variant(signature, args) if signature else None,
                                   GLib.VariantType(reply) if reply else None, Gio.DBusCallFlags.NONE, timeout_ms, None)
        return value.unpack() if value is not None else ()

    def queue(self, uris, mime_types=None, flavor="large", scheduler="default", unqueue=0):
        mime_types = mime_types if mime_types is not None else [""] * len(uris)
        return self.call("Queue", "(asasssu)", (uris, mime_types, flavor, scheduler, unqueue), "(u)")[0]

    def dequeue(self, handle):
        self.call("Dequeue", "(u)", (handle,))

    def cache(self, method, signature, args):
        self.call(method, signature, args, name=CACHE_NAME, path=CACHE_PATH)

    def pump(self, until, timeout=60.0):
        """Dispatches signals until `until()` holds or `timeout` seconds pass; returns whether it held."""
        deadline = time.monotonic() + timeout
        while not until():
            if time.monotonic() > deadline:
                return False
            self.context.iteration(False) or time.sleep(0.002)
        return True

    def finished(self, handle):
        return ("Finished", (handle,)) in self.signals

    def wait(self, handle, timeout=60.0):
        """Waits for Finished of `handle`; returns its outcome (see `outcome`)."""
        self.pump(lambda: self.finished(handle), timeout)
        return self.outcome(handle)

    def outcome(self, handle):
        """What the signals said of `handle` so far."""
        ready, errors, started = [], [], False
        for member, args in self.signals:
            if args[0] != handle:
                continue
            if member == "Started":
                started = True
            elif member == "Ready":
                ready += args[1]
            elif member == "Error":
                errors += [{"uri": u, "code": args[2], "message": args[3]} for u in args[1]]
        return {"handle": handle, "started": started, "ready": ready, "errors": errors,
                "finished": self.finished(handle)}

    def close(self):
        self.bus.signal_unsubscribe(self.subscription)
        self.bus.close_sync(None)


def mime_type(path):
    """The MIME type a file manager passes for `path`: GIO's guess by its name."""
    content_type, _ = Gio.content_type_guess(path, None)
    return Gio.content_type_get_mime_type(content_type) or ""


def main(argv):
    import argparse
    parser = argparse.ArgumentParser(description="Queue files on a thumbnail service and time the answers.")
    parser.add_argument("--address", help="a D-Bus address instead of the session bus")
    parser.add_argument("--flavor", default="large")
    parser.add_argument("--scheduler", default="default")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("files", nargs="+")
    options = parser.parse_args(argv)
    uris = [uri(f) for f in options.files]
    client = Thumbnailer(options.address)

    # A service that leaves the bus (it crashed, or was killed) will never finish: stop then.
    vanished = []
    client.bus.signal_subscribe("org.freedesktop.DBus", "org.freedesktop.DBus", "NameOwnerChanged", "/org/freedesktop/DBus",
                                NAME, Gio.DBusSignalFlags.NONE,
                                lambda *a: vanished.append(time.monotonic()) if not a[5].unpack()[2] else None)

    start = time.monotonic()
    handle = client.queue(uris, [mime_type(f) for f in options.files], flavor=options.flavor, scheduler=options.scheduler)
    replied = time.monotonic()
    client.pump(lambda: client.finished(handle) or bool(vanished), options.timeout)
    result = client.outcome(handle)
    ended = time.monotonic()

    mine = [(member, args, t) for (member, args), t in zip(client.signals, client.arrived) if args[0] == handle]
    answers = [(u, t) for member, args, t in mine if member in ("Ready", "Error") for u in args[1]]
    counts = {}
    for u, _ in answers:
        counts[u] = counts.get(u, 0) + 1

    def since(times):
        return round(min(times) - start, 4) if times else None

    result.update({
        "queued": len(uris),
        "ready_count": len(set(result["ready"])),
        "lost": [u for u in uris if u not in counts],
        "answered_twice": sorted(u for u, n in counts.items() if n > 1),
        "unasked": sorted(set(counts) - set(uris)),
        "seconds_reply": round(replied - start, 4),
        "seconds_first_ready": since([t for member, _, t in mine if member == "Ready"]),
        "seconds_last_answer": round(max(t for _, t in answers) - start, 4) if answers else None,
        "seconds_finished": since([t for member, _, t in mine if member == "Finished"]),
        "seconds_waited": round(ended - start, 4),
        "service_vanished": since(vanished),
    })
    client.close()
    print(json.dumps(result, indent=1))
    return 0 if result["finished"] and result["ready_count"] == len(set(uris)) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
