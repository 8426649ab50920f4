"""deploy/nginx/viewerd.conf on Debian's real nginx, run as the test's user on loopback, in front
of two origins (each a viewerd with its own store and a viewerd-http, both serving one
directory of photos): the second request of a URL is nginx's HIT, every rendition of an image
reaches one origin, an expired entry is revalidated by a 304 from that origin, and with one
origin killed nginx serves what it has cached and sends the rest to the other (issue 33).

The site file is rendered with the test's ports and directories by editing its lines by their
text (each edit must match exactly once, so the file and this test cannot drift apart), and
with a short freshness: the origins' own Cache-Control is ignored there, so that an entry
expires within the test."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import unittest
from typing import Callable, Dict, List, Optional

import http_support
from http_support import Origin, get, support

SITE = os.path.join(http_support.REPO, "deploy", "nginx", "viewerd.conf")
# Seconds an entry is fresh in the test's rendering (the origins' Cache-Control ignored).
FRESH = 3
# Images, each its own identifier: enough that both origins get some whatever the ports hash
# to (all 16 on one origin: 2 in 65536).
IMAGES = [f"photo-{i:02}.jpg" for i in range(16)]
ROOT = "photos"

LOG_LINE = re.compile(r'"(?P<method>\S+) (?P<target>\S+) [^"]*" (?P<status>\d+) \S+ \S+ cache=(?P<cache>\S*) '
                      r'upstream="(?P<upstream>[^"]*)" upstream_status="(?P<upstream_status>[^"]*)"')


def url(image: str, size: str = "64,") -> str:
    return f"/iiif/3/{ROOT}%2F{image}/full/{size}/0/default.jpg"


def wait_for(condition: Callable[[], object], what: str, timeout: float = 30):
    """Polls `condition` until it gives something true (log lines are written after the answer)."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not seen in {timeout} s: {what}")
        time.sleep(0.05)


def render_site(text: str, port: int, origins: List[str], directory: str) -> str:
    """The site file with this test's listen port, origins, cache directory, access log and
    freshness."""
    edits = [
        (r"^(proxy_cache_path )/var/cache/nginx/viewerd ", rf"\g<1>{directory}/cache "),
        (r"^    server 10\.0\.0\.11:8080;\n    server 10\.0\.0\.12:8080;\n", "".join(f"    server {o};\n" for o in origins)),
        (r"^    listen 80;$", f"    listen 127.0.0.1:{port};"),
        (r"^(    access_log )/var/log/nginx/viewerd\.access\.log ", rf"\g<1>{directory}/access.log "),
        (r"^        proxy_cache_valid 200 10m;$",
         f"        proxy_cache_valid 200 {FRESH}s;\n        proxy_ignore_headers Cache-Control Expires;"),
    ]
    for pattern, replacement in edits:
        text, count = re.subn(pattern, replacement, text, flags=re.MULTILINE)
        if count != 1:
            raise AssertionError(f"{SITE}: {pattern!r} matched {count} times (the test renders the site by these lines)")
    return text


class Nginx(http_support.NginxProcess):
    """Debian's nginx in the foreground with a prefix, configuration and temporary paths of its
    own under `directory`, serving the rendered site."""

    def __init__(self, directory: str, origins: List[str]) -> None:
        super().__init__(directory)
        self.access_log = os.path.join(directory, "access.log")
        os.makedirs(os.path.join(directory, "cache"), exist_ok=True)
        with open(SITE, encoding="utf-8") as f:
            site = f.read()
        self.start(lambda port: self._configure(render_site(site, port, origins, directory)))

    def _configure(self, site: str) -> None:
        with open(os.path.join(self.directory, "viewerd.conf"), "w", encoding="utf-8") as f:
            f.write(site)
        d = self.directory
        with open(os.path.join(d, "nginx.conf"), "w", encoding="utf-8") as f:
            f.write(f"{self.user_line()}worker_processes 1;\npid {d}/nginx.pid;\nerror_log {d}/error.log notice;\n"
                    f"events {{ worker_connections 256; }}\n"
                    f"http {{\n    access_log off;\n{self.temporary_paths()}"
                    f"    include {d}/viewerd.conf;\n}}\n")
        check = subprocess.run([http_support.NGINX, "-t", "-p", d, "-c", "nginx.conf", "-e", self.log],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if check.returncode != 0:
            raise AssertionError(f"nginx -t refuses the rendered site:\n{check.stdout.decode()}")

    def records(self, target: str) -> List[Dict[str, str]]:
        """The access log's lines of requests for `target`, parsed."""
        try:
            with open(self.access_log, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except FileNotFoundError:
            return []
        found = []
        for line in lines:
            match = LOG_LINE.search(line)
            if match and match["target"] == target:
                found.append(match.groupdict())
        return found


class NginxCase(unittest.TestCase):
    """Two origins and nginx in front of them, for the class."""

    @classmethod
    def setUpClass(cls) -> None:
        http_support.require_loopback()
        if shutil.which("vips") is None:
            raise AssertionError("the vips CLI (libvips-tools, in make test-deps) makes the test's photos")
        cls.directory = tempfile.mkdtemp(prefix="viewerd-nginx-")
        cls.origins = []
        cls.nginx = None
        try:
            photos = os.path.join(cls.directory, "photos")
            os.makedirs(photos)
            first = support.make_jpeg(os.path.join(photos, IMAGES[0]), 320, 240)
            for name in IMAGES[1:]:
                shutil.copyfile(first, os.path.join(photos, name))
            for name in ("a", "b"):
                cls.origins.append(Origin(os.path.join(cls.directory, name), {ROOT: photos},
                                          ["--trusted-proxy", "127.0.0.1"]))
            cls.nginx = Nginx(os.path.join(cls.directory, "nginx"), [o.front.address for o in cls.origins])
        except BaseException:
            cls.tearDownClass()  # not run by unittest when setUpClass fails
            raise

    @classmethod
    def tearDownClass(cls) -> None:
        if cls.nginx is not None:
            cls.nginx.stop()
        for origin in cls.origins:
            origin.stop()
        shutil.rmtree(cls.directory, ignore_errors=True)

    def logs(self) -> str:
        parts = [f"nginx error log:\n{self.nginx.read_log()}"]
        for origin in self.origins:
            parts.append(f"origin {origin.front.address}: {origin.logs()}")
        return "\n".join(parts)

    def get(self, target: str, headers: Optional[Dict[str, str]] = None):
        """GET through nginx: (headers, body), after checking it is a 200."""
        status, response_headers, body = get(self.nginx.port, target, headers)
        self.assertEqual(status, 200, f"{target}: {body[:300]!r}\n{self.logs()}")
        return response_headers, body

    def served_by(self, target: str, cache: str = "MISS") -> str:
        """The origin (its address) that answered `target`'s request with this cache status,
        from nginx's log; the last one tried when nginx tried several."""
        records = wait_for(lambda: [r for r in self.nginx.records(target) if r["cache"] == cache],
                           f"nginx's log line of {target} with cache={cache}")
        return records[-1]["upstream"].split(", ")[-1]

    def origin(self, address: str) -> Origin:
        return next(o for o in self.origins if o.front.address == address)

    def assert_hit(self, target: str, body: bytes) -> None:
        """The next request of `target` is answered from nginx's cache with these bytes. An
        entry that expired meanwhile (only past FRESH seconds since it was stored: a slow
        machine) is not a failure: it is asked again until a request finds it fresh."""
        for _ in range(5):
            stored = time.monotonic()
            headers, again = self.get(target)
            if headers["X-Cache-Status"] == "HIT":
                self.assertEqual(again, body, f"{target}: a HIT with other bytes")
                return
            self.assertGreater(time.monotonic() - stored, FRESH,
                               f"{target}: {headers['X-Cache-Status']} within {FRESH} s of being stored\n{self.logs()}")
        self.fail(f"{target}: never a HIT")


class NginxCachingTests(NginxCase):
    def test_second_request_is_a_hit_and_every_rendition_of_an_image_reaches_one_origin(self) -> None:
        served = {}
        for image in IMAGES:
            for target in (url(image), url(image, "32,"), f"/iiif/3/{ROOT}%2F{image}/info.json"):
                headers, body = self.get(target)
                self.assertEqual(headers["X-Cache-Status"], "MISS", target)
                self.assert_hit(target, body)
                served.setdefault(image, set()).add(self.served_by(target))
        for image, origins in served.items():
            self.assertEqual(len(origins), 1, f"{image}'s renditions reached {origins}")
        used = set().union(*served.values())
        self.assertEqual(used, {o.front.address for o in self.origins},
                         f"one origin got every image: {served}")
        # and the origins' own access logs agree: each URL reached its origin, never the other
        for image in IMAGES:
            (address,) = served[image]
            target = url(image)
            wait_for(lambda: self.origin(address).front.saw(target), f"{target} in {address}'s access log")
            for other in self.origins:
                if other.front.address != address:
                    self.assertEqual(other.front.saw(target), [], f"{target} reached {other.front.address} too")

    def test_an_expired_entry_is_revalidated_by_a_304_from_its_origin(self) -> None:
        target = url(IMAGES[0], "48,")
        headers, body = self.get(target)
        self.assertEqual(headers["X-Cache-Status"], "MISS")
        self.assertTrue(headers.get("ETag"), f"no ETag from the origin: {dict(headers)}")
        origin = self.origin(self.served_by(target))
        time.sleep(FRESH + 1)
        # Expired: served from the cache at once while one background request revalidates it
        headers, again = self.get(target)
        self.assertIn(headers["X-Cache-Status"], ("STALE", "UPDATING", "REVALIDATED"))
        self.assertEqual(again, body)
        revalidations = wait_for(lambda: [r for r in origin.front.saw(target) if r.get("status") == "304"],
                                 f"a 304 for {target} in {origin.front.address}'s access log")
        self.assertEqual(len(revalidations), 1, revalidations)
        other = next(o for o in self.origins if o is not origin)
        self.assertEqual(other.front.saw(target), [], "the revalidation went to the other origin")
        # revalidated: fresh again, the same bytes from the cache
        self.assert_hit(target, body)

    def test_info_json_names_the_site_whatever_forwarded_headers_a_client_sends(self) -> None:
        # nginx sets every X-Forwarded-* the origins believe: a client's own never reach them
        # (2.1's info.json: the other test has every image's 3.0 info.json go through the cache)
        target = f"/iiif/2/{ROOT}%2F{IMAGES[1]}/info.json"
        headers, body = self.get(target, {"X-Forwarded-Host": "evil.example", "X-Forwarded-Proto": "https",
                                          "X-Forwarded-Prefix": "/evil"})
        info = json.loads(body)
        self.assertEqual(info["@id"], f"http://127.0.0.1:{self.nginx.port}/iiif/2/{ROOT}%2F{IMAGES[1]}", info)


class NginxFailoverTests(NginxCase):
    def test_with_an_origin_killed_nginx_serves_its_cache_and_sends_the_rest_to_the_other(self) -> None:
        cached, served = {}, {}
        for image in IMAGES:
            cached[image] = self.get(url(image))[1]
            served[image] = self.served_by(url(image))
        killed, survivor = self.origins[1], self.origins[0]
        lost = [image for image in IMAGES if served[image] == killed.front.address]
        self.assertTrue(lost and len(lost) < len(IMAGES), f"one origin got every image: {served}")
        killed.kill()

        # What the cache does not have of the killed origin's images: the other origin renders it
        for image in lost:
            target = url(image, "40,")
            headers, _ = self.get(target)
            self.assertEqual(headers["X-Cache-Status"], "MISS")
            self.assertEqual(self.served_by(target), survivor.front.address)
            wait_for(lambda: survivor.front.saw(target), f"{target} in the surviving origin's access log")
        tried = [r for image in lost for r in self.nginx.records(url(image, "40,"))
                 if r["upstream"].startswith(killed.front.address + ", ")]
        self.assertTrue(tried, "nginx never tried the killed origin first: its images did not hash to it")

        # What the cache has of them: served, fresh or stale, with the bytes it had
        for image in lost:
            headers, body = self.get(url(image))
            self.assertIn(headers["X-Cache-Status"], ("HIT", "STALE", "UPDATING"), image)
            self.assertEqual(body, cached[image], image)


if __name__ == "__main__":
    unittest.main()
