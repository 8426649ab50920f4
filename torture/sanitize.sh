#!/usr/bin/env bash
# sanitize.sh thread|address BUILD_PATH: the test suite under one sanitizer.
#
# Builds everything (the daemon and worker processes the end-to-end tests start included)
# with --sanitize=KIND, runs the suite, and has every process write its reports to files
# (log_path), so that a report from a daemon or a worker fails the run as surely as one from
# the test process. Suppressions: torture/tsan.supp, torture/asan.supp, torture/lsan.supp,
# third-party code only, each with its reason.
#
# Skipped under sanitizers: "Torture (short)" (make torture runs it; too slow instrumented).
set -uo pipefail
KIND=$1
BUILD=$2
SWIFT=${SWIFT:-swift}
HERE=$(cd "$(dirname "$0")" && pwd)
REPORTS=$BUILD/sanitizer-reports
rm -rf "$REPORTS"
mkdir -p "$REPORTS"

echo "== sanitize=$KIND: build ($BUILD)"
$SWIFT build --no-color-diagnostics --build-tests --sanitize="$KIND" --build-path "$BUILD" > "$BUILD/build.log" 2>&1
built=$?
grep -E 'error:|Build complete' "$BUILD/build.log"
[ $built -eq 0 ] || { echo "sanitize: build failed; see $BUILD/build.log"; exit 1; }

case $KIND in
  thread)
    # exitcode=0: a worker with a report must not look crashed to the daemon; reports are judged
    # from the log files below instead.
    export TSAN_OPTIONS="log_path=$REPORTS/tsan suppressions=$HERE/tsan.supp halt_on_error=0 exitcode=0 second_deadlock_stack=1 history_size=4"
    ;;
  address)
    export ASAN_OPTIONS="log_path=$REPORTS/asan suppressions=$HERE/asan.supp detect_leaks=1 abort_on_error=0 detect_stack_use_after_return=0"
    export LSAN_OPTIONS="suppressions=$HERE/lsan.supp print_suppressions=0 exitcode=0"
    ;;
  *) echo "usage: $0 thread|address BUILD_PATH" >&2; exit 64 ;;
esac

# Swift's crash backtracer reads other threads' memory and trips the sanitizers after a real
# report; the sanitizer's own report is the one to read.
export SWIFT_BACKTRACE=enable=no

echo "== sanitize=$KIND: test"
# Serialized and bounded: instrumented, parallel suites on 2 cores starved Swift's
# cooperative pool (the AddressSanitizer run hung for 15 minutes with idle daemons).
timeout "${SANITIZE_TIMEOUT:-1800}" $SWIFT test --no-color-diagnostics --skip-build --sanitize="$KIND" --build-path "$BUILD" --skip "Torture" \
  ${SANITIZE_PARALLEL:---no-parallel} > "$BUILD/test.log" 2>&1
status=$?
[ $status -eq 124 ] && echo "sanitize=$KIND: the suite did not finish in ${SANITIZE_TIMEOUT:-1800} s"
grep -E "^(✔|✘) Test run|Executed .* tests" "$BUILD/test.log" | tail -3

reports=$(find "$REPORTS" -type f | sort)
dirty=0
if [ -n "$reports" ]; then
  dirty=1
  echo "sanitize=$KIND: $(echo "$reports" | wc -l) report file(s) from the tests and the processes they started:"
  for f in $reports; do
    echo "--- $f"
    grep -E "^(==[0-9]+==)?(WARNING|ERROR|SUMMARY|Direct leak|Indirect leak)|^    #[0-9]+ " "$f" | head -40
  done
fi
if [ $status -ne 0 ]; then
  echo "sanitize=$KIND: the test suite failed (status $status); see $BUILD/test.log"
  grep -E "✘|error:" "$BUILD/test.log" | head -20
fi
if [ $status -ne 0 ] || [ $dirty -ne 0 ]; then exit 1; fi
echo "sanitize=$KIND: clean"
