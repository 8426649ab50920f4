#!/usr/bin/env python3
"""tsan-triage.py REPORT...: sorts ThreadSanitizer reports into those it cannot judge and the rest.

ThreadSanitizer on Linux does not see the synchronization of Swift's Synchronization.Mutex:
its lock and unlock are atomics and futex calls inside libswiftSynchronization.so, which is
not instrumented. Two accesses made inside `withLock` closures therefore look unordered and
are reported as races although the mutex orders them (torture/README.md has a 10-line
program that shows it: two threads, one Mutex<Int>, the right count, and a report).

A report is set aside as "inside Mutex.withLock" only when BOTH of its accesses happen while
a withLock closure runs: each stack has a frame that is a closure of the type Mutex.withLock
takes, `(inout sending Value) throws(E) -> sending Result`, mangled "...zYuYTXEfU_" (no other
API of the code base takes closures of that type). A race with one side outside any lock is
still reported, as is every other kind of report. What this cannot tell: whether the two
closures hold the same mutex (two mutexes guarding one value would be a real bug it hides). Prints the rest in full;
exits 1 if there are any.
"""
import re, sys

WITH_LOCK = re.compile(r"zYuYTXEfU\d*_")
OWN = re.compile(r"/work/|/Sources/|/Tests/")


def reports(text):
    block = []
    for line in text.splitlines():
        if line.startswith("WARNING: ThreadSanitizer"):
            if block:
                yield block
            block = [line]
        elif block:
            block.append(line)
            if line.startswith("SUMMARY:"):
                yield block
                block = []
    if block:
        yield block


def stacks(block):
    """The frames of each access (the current one and the previous one)."""
    result, current = [], None
    for line in block:
        stripped = line.strip()
        if re.match(r"(Read|Write|Atomic|Modifying|Read-only|Previous)", stripped) and "thread" in stripped:
            current = []
            result.append(current)
        elif current is not None and stripped.startswith("#"):
            current.append(stripped)
        elif not stripped:
            current = None
    return result


def inside_with_lock(frames):
    """Whether a withLock closure is on the stack: the access happens while it runs (in it,
    or in a function it calls), so with the mutex held."""
    return any(WITH_LOCK.search(frame.split()[1] if len(frame.split()) > 1 else frame) for frame in frames)


def main():
    judged, unjudged = [], 0
    for path in sys.argv[1:]:
        for block in reports(open(path, errors="replace").read()):
            access = stacks(block)
            if len(access) >= 2 and all(inside_with_lock(s) for s in access[:2]):
                unjudged += 1
            else:
                judged.append((path, block))
    print("tsan: %d report(s) with both accesses inside Mutex.withLock (TSan cannot see that lock; not judged)" % unjudged)
    for path, block in judged:
        print("--- %s" % path)
        print("\n".join(block[:60]))
    print("tsan: %d other report(s)" % len(judged))
    return 1 if judged else 0


sys.exit(main())
