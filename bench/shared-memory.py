#!/usr/bin/env python3
"""Time for a stored 2560x1440 raw rendition to be in the client's memory: inline (the pixels
through the socket, 14.7 MB copied out of the frame) against shared memory (a sealed memfd
attached to the RESULT, mapped read-only and populated: MAP_POPULATE), each RENDER sent and
answered alone, each way in a block of its own, after one render that stores it.

    bench/shared-memory.py .build/release/viewerd            # p50 and p95 of each, in ms
    bench/shared-memory.py .build/debug/viewerd --count 100

Needs the vips CLI (libvips-tools) for the source image.
"""
import argparse, os, shutil, statistics, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
import viewerd  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("viewerd")
    parser.add_argument("--count", type=int, default=200)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="viewerd-shm-")
    os.chmod(root, 0o700)
    socket_path = os.path.join(root, "viewerd.sock")
    source = os.path.join(root, "page.jpg")
    subprocess.run(["vips", "gaussnoise", source + ".v", "2560", "1440"], check=True)
    subprocess.run(["vips", "copy", source + ".v", source + "[Q=90]"], check=True)
    daemon = subprocess.Popen([args.viewerd, "--config", "/dev/null", "--socket", socket_path,
                               "--cache-dir", os.path.join(root, "cache")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30
        while not os.path.exists(socket_path):
            if time.monotonic() > deadline:
                raise SystemExit("the daemon did not listen")
            time.sleep(0.05)
        with viewerd.Client(socket_path, client_name="shm-bench") as client:
            first = client.render(source, 2560, 1440, format="raw")
            assert (first.width, first.height) == (2560, 1440)
            del first
            times = {"inline": [], "shared": []}
            # Each way in a block of its own, as a viewer would use one: an inline answer's 14.7 MB
            # copies between the shared ones would measure the caches they leave cold.
            for kind in ("inline", "shared"):
                for _ in range(args.count):
                    start = time.perf_counter()
                    result = client.render(source, 2560, 1440, format="raw", shared_memory=kind == "shared")
                    times[kind].append((time.perf_counter() - start) * 1000)
                    assert result.from_cache and len(result.data) == 2560 * 1440 * 4
                    assert isinstance(result.data, memoryview) == (kind == "shared")
                    del result
        for kind, values in times.items():
            values.sort()
            print(f"{kind:6s} 2560x1440 raw hit in client memory: p50 {statistics.median(values):.2f} ms, "
                  f"p95 {values[int(len(values) * 0.95) - 1]:.2f} ms ({len(values)} requests)")
    finally:
        daemon.terminate()
        daemon.wait(timeout=20)
        shutil.rmtree(root, ignore_errors=True)


main()
