#!/usr/bin/env python3
"""Runs a test command and turns a hang into a diagnosed failure.

    python3 Tests/watch-tests.py [--test-limit S] [--quiet-limit S] -- swift test ...

The command's output (stdout and stderr, merged) is passed through line by line. Swift
Testing's "◇ Test "NAME" started." and its end lines tell which tests are running. When one
has run longer than --test-limit seconds, or nothing was printed for --quiet-limit seconds,
this prints which tests are running, the process tree under the command with each process's
state and wait channel, and each test process's threads' stacks (gdb, where installed), then
kills the tree and exits 124. A CI run that hangs would otherwise print nothing for an hour
and be cut off with no word of what hung.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

STARTED = re.compile(r'◇ Test "(.*)" started\.\s*$')
ENDED = re.compile(r'[✔✘↳] Test "(.*?)" (?:passed|failed|with \d+ test case|skipped|recorded)')


def descendants(root):
    """The processes under `root` (pid: (ppid, state, comm, args)), from /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        # comm may hold spaces and parentheses: the fields after the last ')' are fixed.
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        table[int(entry)] = (int(fields[1]), fields[0], comm, args)
    under, frontier = ({root: table[root]} if root in table else {}), [root]
    while frontier:
        parent = frontier.pop()
        for pid, row in table.items():
            if row[0] == parent and pid not in under:
                under[pid] = row
                frontier.append(pid)
    return under


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as error:
        return f"({error.strerror})"


def diagnose(child, running, why):
    out = sys.stdout
    out.write(f"\nwatch-tests: {why}\n")
    now = time.monotonic()
    for name, since in sorted(running.items(), key=lambda item: item[1]):
        out.write(f"watch-tests: still running after {now - since:.0f} s: {name}\n")
    tree = descendants(child.pid)
    out.write("watch-tests: the processes under the test command (pid ppid state wchan: args)\n")
    for pid, (ppid, state, comm, args) in sorted(tree.items()):
        out.write(f"  {pid} {ppid} {state} {read(f'/proc/{pid}/wchan') or '-'}: {args or comm}\n")
    gdb = shutil.which("gdb")
    for pid, (_, _, comm, args) in sorted(tree.items()):
        if ".xctest" not in args and "viewerd" not in comm:
            continue
        if not gdb:
            out.write(f"watch-tests: no gdb here for the stacks of {pid}; its threads' wait channels:\n")
            for task in sorted(os.listdir(f"/proc/{pid}/task")) if os.path.isdir(f"/proc/{pid}/task") else []:
                out.write(f"  {task} {read(f'/proc/{pid}/task/{task}/comm')}: {read(f'/proc/{pid}/task/{task}/wchan')}\n")
            continue
        out.write(f"watch-tests: the threads of {pid} ({comm})\n")
        out.flush()
        try:
            stacks = subprocess.run([gdb, "-p", str(pid), "-batch", "-nx", "-ex", "thread apply all bt 30"],
                                    capture_output=True, text=True, timeout=120).stdout
        except subprocess.TimeoutExpired:
            stacks = "(gdb did not finish within 120 s)\n"
        # Frames only: gdb's symbol-loading chatter would bury them.
        out.write("".join(line + "\n" for line in stacks.splitlines() if line.startswith(("#", "Thread"))))
    out.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--test-limit", type=float, default=600)
    parser.add_argument("--quiet-limit", type=float, default=900)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("no command")
    # stdbuf: the test binary's stdio sees a pipe and would hold its last lines in a buffer,
    # the lines that name what was running when it was killed.
    if shutil.which("stdbuf"):
        command = ["stdbuf", "-oL", "-eL"] + command
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    running, lock = {}, threading.Lock()
    last_output = [time.monotonic()]
    hung = threading.Event()

    def watch():
        while child.poll() is None:
            time.sleep(5)
            now = time.monotonic()
            with lock:
                over = [name for name, since in running.items() if now - since > options.test_limit]
                quiet = now - last_output[0] > options.quiet_limit
                snapshot = dict(running)
            if over or quiet:
                why = (f"a test ran longer than {options.test_limit:.0f} s" if over
                       else f"nothing printed for {options.quiet_limit:.0f} s")
                diagnose(child, snapshot, why)
                hung.set()
                os.killpg(child.pid, signal.SIGKILL)
                return

    threading.Thread(target=watch, daemon=True).start()
    for raw in child.stdout:
        line = raw.decode(errors="replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        with lock:
            last_output[0] = time.monotonic()
            if started := STARTED.search(line):
                running[started.group(1)] = time.monotonic()
            elif ended := ENDED.search(line):
                running.pop(ended.group(1), None)
    status = child.wait()
    if hung.is_set():
        sys.stdout.write("watch-tests: killed the hung test run (exit 124)\n")
        return 124
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
