#!/usr/bin/env python3
"""User-space instructions the daemon spends on one warm hit, counted by callgrind.

Wall-clock hit figures on a shared or virtual host are dominated by the kernel's wake-ups and
move by a fifth between runs; an instruction count does not. The daemon (its workers are not
traced) serves the same stored renditions SMALL and then LARGE times; the difference of the two
totals, divided by LARGE - SMALL, is one hit's cost, start-up and the first renders cancelled out.

    bench/hit-instructions.py .build/release/viewerd            # e.g. "77135 instructions per hit"
    bench/hit-instructions.py OLD/viewerd NEW/viewerd            # one line each, to compare builds

Needs valgrind (Debian's 3.19 cannot read the DWARF 5 of Swift's binaries: a copy without debug
information, `strip -g`, is what runs) and the bench corpus (bench/fetch-corpus.sh) or --files.
"""
import argparse, glob, os, re, shutil, subprocess, sys, tempfile, time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))
import viewerd  # noqa: E402


def wait_for(path, seconds=30):
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit(f"the daemon did not listen on {path}")
        time.sleep(0.05)


def instructions(daemon, files, hits, work):
    """The callgrind total of a daemon that served `hits` hits of `files`, stored beforehand."""
    sock, cache = os.path.join(work, "s.sock"), os.path.join(work, "cache")
    # The store is filled by a daemon run natively, so the traced one only serves.
    if not os.path.isdir(cache):
        process = subprocess.Popen([daemon, "--socket", sock, "--cache-dir", cache], stderr=subprocess.DEVNULL)
        wait_for(sock)
        with viewerd.Client(sock) as client:
            for path in files:
                client.render(path, 256, 256)
        process.terminate()
        process.wait()
    if os.path.exists(sock):
        os.unlink(sock)
    log = os.path.join(work, f"callgrind-{hits}.log")
    out = os.path.join(work, f"callgrind-{hits}.out")
    with open(log, "w") as stderr:
        process = subprocess.Popen(["valgrind", "--tool=callgrind", "--trace-children=no", f"--callgrind-out-file={out}",
                                    daemon, "--socket", sock, "--cache-dir", cache], stderr=stderr)
    wait_for(sock, 120)
    with viewerd.Client(sock) as client:
        for i in range(hits):
            client.render(files[i % len(files)], 256, 256)
    process.terminate()
    process.wait()
    found = re.findall(r"Collected : (\d+)", open(log).read())
    if not found:
        raise SystemExit(f"callgrind counted nothing: see {log}")
    return int(found[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("daemons", nargs="+", help="viewerd executables (release builds)")
    parser.add_argument("--files", nargs="*", help="sources to render (default: 20 of the bench corpus' originals)")
    parser.add_argument("--small", type=int, default=200)
    parser.add_argument("--large", type=int, default=2200)
    args = parser.parse_args()
    corpus = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "viewerd-bench")
    files = args.files or sorted(glob.glob(os.path.join(corpus, "corpus", "originals", "*")))[:20]
    if not files:
        raise SystemExit("no files: run bench/fetch-corpus.sh or pass --files")
    for daemon in args.daemons:
        with tempfile.TemporaryDirectory(prefix="viewerd-hits-") as work:
            stripped = os.path.join(work, "viewerd")
            subprocess.run(["strip", "-g", "-o", stripped, daemon], check=True)
            small = instructions(stripped, files, args.small, work)
            large = instructions(stripped, files, args.large, work)
            print(f"{daemon}: {(large - small) // (args.large - args.small)} instructions per hit")


if __name__ == "__main__":
    main()
