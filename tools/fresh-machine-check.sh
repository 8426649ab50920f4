#!/bin/bash
# make fresh-machine-check: README's two commands (`make run`, `make test`) on a brand-new Debian
# machine. A bookworm minbase root made by debootstrap, plus exactly what README's "A fresh
# machine" says one has, gets a clean clone of this checkout's HEAD; inside it, as root and with
# no terminal, `make run` must answer `viewerctl ping` and stop cleanly on SIGTERM, then
# `make test` must pass. Run as root (debootstrap, mounts, namespaces). Not part of `make test`.
#
# The root is entered through a mount and PID namespace of its own with pivot_root, not a bare
# chroot: the kernel refuses user namespaces (the workers' sandbox, and the tests that check it)
# to a chrooted process, so a chroot would allow less than the host does. The namespace's mounts
# (/proc, /sys, /dev, /dev/pts, /dev/shm, /tmp, the toolchain) die with it, and the exit trap
# kills it, so nothing stays mounted after a failure or an interrupt.
#
# Environment:
#   FRESH_DIR            where the cached pristine root, the run's root and the logs live
#                        (default /var/tmp/viewerd-fresh)
#   FRESH_MIRROR         the Debian mirror (default http://deb.debian.org/debian)
#   FRESH_SWIFT          the host's toolchain, bind-mounted read-only (default /opt/swift)
#   FRESH_RUN_TIMEOUT    seconds for `make run` to install, build and answer ping (default 1200)
#   FRESH_TEST_TIMEOUT   seconds for `make test` (default 10800)
set -euo pipefail

SUITE=bookworm
FRESH_DIR=${FRESH_DIR:-/var/tmp/viewerd-fresh}
FRESH_MIRROR=${FRESH_MIRROR:-http://deb.debian.org/debian}
FRESH_SWIFT=${FRESH_SWIFT:-/opt/swift}
FRESH_RUN_TIMEOUT=${FRESH_RUN_TIMEOUT:-1200}
FRESH_TEST_TIMEOUT=${FRESH_TEST_TIMEOUT:-10800}
# Where the clone goes inside the root: world-traversable, as the tests that run a daemon as
# nobody need (root's home is 0700).
CLONE=/usr/local/src/viewerd
INSIDE_PATH=/opt/swift/usr/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# What a fresh machine has besides minbase; README's "A fresh machine" lists the same, with why.
# The Swift toolchain's own needs on Debian 12, from ldd on its binaries and swift.org's list,
# less what only lldb, the REPL, C++ interop or static linking use (libpython3, libedit2,
# libstdc++-12-dev, the -dev packages of curl, xml2 and zlib): libcurl4, libxml2, libsqlite3-0,
# libncurses6 (swift-build and the driver do not start without them) and libc6-dev (the C
# library's headers and start files; gcc brings binutils and libgcc-12-dev). tzdata and zlib1g
# are in minbase already. Then gcc, python3 and git, and make to type the two commands.
FRESH_PACKAGES="libcurl4 libxml2 libsqlite3-0 libncurses6 libc6-dev gcc python3 git make"

log() { echo "fresh-machine-check: $*"; }
die() { log "$*" >&2; exit 2; }

# ---------------------------------------------------------------------------------------------
# Inside the root (the last stage): the two commands, timed.
# ---------------------------------------------------------------------------------------------

# The children of process $1 (minbase has no procps).
children_of() {
    local stat rest
    for stat in /proc/[0-9]*/stat; do
        rest=$(cat "$stat" 2>/dev/null) || continue
        rest=${rest##*) }                                 # after "pid (comm) ": state ppid ...
        set -- "$1" $rest
        [ "$3" = "$1" ] && { stat=${stat#/proc/}; echo "${stat%/stat}"; }
    done
    return 0
}

inside_phase_run() {
    local runlog=/var/log/fresh-make-run.log started=$SECONDS deadline=$((SECONDS + FRESH_RUN_TIMEOUT))
    make run </dev/null >"$runlog" 2>&1 &
    local make_pid=$! next_note=$((SECONDS + 60))
    until [ -x .build/release/viewerctl ] && .build/release/viewerctl ping </dev/null >/dev/null 2>&1; do
        if ! kill -0 "$make_pid" 2>/dev/null; then
            local status=0; wait "$make_pid" || status=$?
            tail -n 60 "$runlog"; log "make run exited with status $status before viewerd answered ping"; return 1
        fi
        if [ "$SECONDS" -ge "$deadline" ]; then
            tail -n 60 "$runlog"; log "no answer to viewerctl ping within $FRESH_RUN_TIMEOUT s"
            kill -TERM "$make_pid" 2>/dev/null || true; return 1
        fi
        if [ "$SECONDS" -ge "$next_note" ]; then
            log "make run: waiting for viewerctl ping, $((SECONDS - started)) s; last line: $(tail -n 1 "$runlog" | cut -c1-120)"
            next_note=$((SECONDS + 60))
        fi
        sleep 5
    done
    log "make run: viewerd answers viewerctl ping after $((SECONDS - started)) s: $(.build/release/viewerctl ping 2>&1 | head -n 1)"

    # `make run` execs viewerd from its recipe's shell, so the daemon is make's only child.
    # SIGTERM goes to the daemon alone, as systemd or a Ctrl-C would deliver it to the daemon.
    local daemon_pid
    daemon_pid=$(children_of "$make_pid")
    if [ -z "$daemon_pid" ] || [ "$(cat "/proc/$daemon_pid/comm" 2>/dev/null)" != viewerd ]; then
        log "make run: cannot find viewerd among make's children (${daemon_pid:-none})"
        kill -TERM "$make_pid" 2>/dev/null || true; return 1
    fi
    kill -TERM "$daemon_pid"
    local stop_deadline=$((SECONDS + 60))
    while kill -0 "$make_pid" 2>/dev/null && [ "$SECONDS" -lt "$stop_deadline" ]; do sleep 1; done
    if kill -0 "$make_pid" 2>/dev/null; then
        tail -n 20 "$runlog"; log "make run: viewerd did not exit within 60 s of SIGTERM"
        kill -KILL "$daemon_pid" 2>/dev/null || true; return 1
    fi
    local status=0; wait "$make_pid" || status=$?
    tail -n 5 "$runlog"
    if [ "$status" -ne 0 ]; then log "make run: exited with status $status after SIGTERM"; return 1; fi
    log "make run: viewerd exited 0 after SIGTERM"
}

inside_phase_test() {
    local testlog=/var/log/fresh-make-test.log status=0
    timeout --kill-after=60 "$FRESH_TEST_TIMEOUT" make test </dev/null 2>&1 | tee "$testlog" || status=${PIPESTATUS[0]}
    # What failed, in one place: Swift Testing's failed tests, XCTest's, and unittest's.
    log "make test: exit status $status; failed and skipped tests:"
    grep -E '^(✘ Test "|Test Case .* failed|(FAIL|ERROR): )|Test run with |SKIPPED|skipped:' "$testlog" \
        | sort -u | sed 's/^/    /' || echo "    none"
    [ "$status" -eq 0 ]
}

inside() {
    cd "$CLONE"
    log "inside: $(. /etc/os-release && echo "$PRETTY_NAME"), $(swift --version 2>&1 | head -n 1), $(nproc) cores, HEAD $(git rev-parse --short HEAD)"
    local failed="" started
    for phase in run test; do
        started=$SECONDS
        log "phase make-$phase: start"
        if "inside_phase_$phase"; then
            log "phase make-$phase: passed in $((SECONDS - started)) s"
        else
            log "phase make-$phase: FAILED in $((SECONDS - started)) s"
            failed="make-$phase"; break
        fi
    done
    [ -z "$failed" ] || { echo "$failed" >/var/log/fresh-failed-phase; return 1; }
}

# ---------------------------------------------------------------------------------------------
# In the namespace, before the root is entered: mounts, pivot_root, then the inside stage.
# ---------------------------------------------------------------------------------------------

# The mounts a root needs before pivot_root (tools/deb-check.sh enters its root with these too).
mount_root_basics() {
    local root=$1
    mount --make-rprivate /
    mount --bind "$root" "$root"                          # pivot_root needs a mount point
    mount -t proc -o nosuid,nodev,noexec proc "$root/proc"  # this PID namespace's processes
    mount --rbind /sys "$root/sys"
    mount --rbind /dev "$root/dev"
    mount -t devpts -o newinstance,ptmxmode=0666,mode=0620,gid=5 devpts "$root/dev/pts"
    mount --bind "$root/dev/pts/ptmx" "$root/dev/ptmx"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/dev/shm"
    mount -t tmpfs -o nosuid,nodev,mode=1777 tmpfs "$root/tmp"
    mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$root/run"   # as on a booted machine
    mkdir -p "$root/run/lock"
}

# Makes $1 this namespace's root; the host's tree goes.
pivot_into() {
    cd "$1"
    mkdir -p .old-root
    pivot_root . .old-root
    umount -l /.old-root
    rmdir /.old-root
}

enter() {
    local root=$1
    mount_root_basics "$root"
    mkdir -p "$root/opt/swift"
    mount --bind "$FRESH_SWIFT" "$root/opt/swift"
    mount -o remount,bind,ro "$root/opt/swift"
    pivot_into "$root"
    # A login's environment and nothing of ours: no terminal, no VIEWERD_*, no XDG_RUNTIME_DIR
    # (so the socket is /tmp/viewerd-0/viewerd.sock, as for root on a server).
    exec env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8 PATH="$INSIDE_PATH" \
        FRESH_RUN_TIMEOUT="$FRESH_RUN_TIMEOUT" FRESH_TEST_TIMEOUT="$FRESH_TEST_TIMEOUT" \
        /bin/bash "$CLONE/tools/fresh-machine-check.sh" --inside </dev/null
}

# ---------------------------------------------------------------------------------------------
# On the host: the pristine root (cached), this run's copy, the clone, the namespace.
# ---------------------------------------------------------------------------------------------

# Mounts under $1 in this (the host's) mount namespace, deepest first.
mounts_under() {
    case "$1" in /?*) ;; *) die "mounts_under: not a path below /: '$1'" ;; esac
    awk -v root="$1" '$5 == root || index($5, root "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r
}

unmount_all_under() {
    local mount
    for mount in $(mounts_under "$1"); do umount -l "$mount" 2>/dev/null || true; done
}

# Debootstrap, then the fresh machine's packages, then a tarball named by everything it holds,
# so a changed package list makes a new one and an unchanged one is never downloaded again.
pristine_tarball() {
    local key tarball build
    key=$(printf '%s\n' "$SUITE" "$FRESH_MIRROR" "$FRESH_PACKAGES" | sha256sum | cut -c1-12)
    tarball=$FRESH_DIR/pristine-$SUITE-minbase-$key.tar
    if [ -s "$tarball" ]; then echo "$tarball"; return; fi
    build=$FRESH_DIR/pristine-build
    unmount_all_under "$build"; rm -rf "$build"
    log "debootstrap --variant=minbase $SUITE from $FRESH_MIRROR (once; cached as $tarball)" >&2
    debootstrap --variant=minbase "$SUITE" "$build" "$FRESH_MIRROR" >&2
    # The sources a Debian 12 installation has: the release, its updates and security.
    rm -f "$build/etc/apt/sources.list"
    cat >"$build/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $FRESH_MIRROR
Suites: $SUITE $SUITE-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${FRESH_MIRROR%/debian}/debian-security
Suites: $SUITE-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
    cp /etc/resolv.conf "$build/etc/resolv.conf"
    log "installing the fresh machine's packages: $FRESH_PACKAGES" >&2
    mount -t proc proc "$build/proc"
    local status=0
    chroot "$build" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
        /bin/sh -c "apt-get update -qq && apt-get upgrade -y -qq && apt-get install -y -qq --no-install-recommends $FRESH_PACKAGES && apt-get clean" >&2 \
        || status=$?
    umount "$build/proc"
    [ "$status" -eq 0 ] || die "the fresh machine's packages did not install (status $status)"
    tar -C "$build" --numeric-owner --xattrs -cf "$tarball.partial" . && mv "$tarball.partial" "$tarball"
    rm -rf "$build"
    echo "$tarball"
}

host() {
    [ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mounts and namespaces need it)"
    [ -x "$FRESH_SWIFT/usr/bin/swift" ] || die "no Swift toolchain at $FRESH_SWIFT (FRESH_SWIFT names another)"
    local project; project=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
    mkdir -p "$FRESH_DIR/logs"
    # Globals, not locals: the exit trap reads them after host() has returned.
    logfile=$FRESH_DIR/logs/fresh-machine-check-$(date -u +%Y%m%dT%H%M%SZ).log
    exec > >(tee "$logfile") 2>&1
    log "log: $logfile"
    started=$SECONDS root=$FRESH_DIR/root phase=setup
    local phase_started

    # Whatever happens from here on, the namespace (and with it every mount) goes, and nothing
    # stays mounted under the run's root.
    ns_pid=""
    finish() {
        local status=$?
        if [ -n "$ns_pid" ] && kill -0 "$ns_pid" 2>/dev/null; then kill -KILL "$ns_pid" 2>/dev/null || true; wait "$ns_pid" 2>/dev/null || true; fi
        unmount_all_under "$root"; unmount_all_under "$FRESH_DIR/pristine-build"
        if [ -n "$(mounts_under "$FRESH_DIR")" ]; then log "still mounted: $(mounts_under "$FRESH_DIR" | tr '\n' ' ')"; fi
        if [ "$status" -eq 0 ]; then
            log "PASSED in $((SECONDS - started)) s"
        else
            log "FAILED in $((SECONDS - started)) s at phase $phase (log: $logfile)"
        fi
    }
    trap finish EXIT
    trap 'exit 130' INT TERM HUP

    if ! command -v debootstrap >/dev/null; then
        log "installing debootstrap"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap
    fi
    [ -z "$(git -C "$project" status --porcelain --untracked-files=no)" ] ||
        log "note: the working tree has uncommitted changes; the check tests HEAD ($(git -C "$project" rev-parse --short HEAD)) only"

    phase=rootfs; phase_started=$SECONDS
    local tarball; tarball=$(pristine_tarball)
    unmount_all_under "$root"; rm -rf "$root"; mkdir -p "$root"
    tar -C "$root" --numeric-owner --xattrs -xpf "$tarball"
    cp /etc/resolv.conf "$root/etc/resolv.conf"          # this network's, not the cached one's
    [ -e "$root/etc/hosts" ] || cp /etc/hosts "$root/etc/hosts"
    # This network's certificate authorities too: a machine on a network that inspects TLS trusts
    # its authority (the host here does, in /usr/local/share/ca-certificates), and without it pip
    # cannot reach PyPI for the validator. Debian's ca-certificates, which the test packages pull
    # in, adds what is in that directory to the bundle every TLS client reads; nothing else of the
    # host's comes along.
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        mkdir -p "$root/usr/local/share/ca-certificates"
        cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
        log "this network's certificate authorities: $(cd /usr/local/share/ca-certificates && ls -- *.crt | tr '\n' ' ')"
    fi
    log "phase rootfs: $(basename "$tarball") unpacked in $((SECONDS - phase_started)) s"

    phase=clone; phase_started=$SECONDS
    git clone -q --no-local --no-checkout "$project" "$root$CLONE"
    git -C "$root$CLONE" checkout -q --detach "$(git -C "$project" rev-parse HEAD)"
    log "phase clone: $(git -C "$root$CLONE" log -1 --format='%h %s' | cut -c1-100) in $((SECONDS - phase_started)) s"

    # The inside stage runs its two phases and leaves the failing one's name behind.
    phase=inside
    local status=0
    unshare --mount --pid --fork --kill-child -- "$0" --enter "$root" &
    ns_pid=$!
    wait "$ns_pid" || status=$?
    ns_pid=""
    if [ "$status" -ne 0 ]; then
        [ -s "$root/var/log/fresh-failed-phase" ] && phase=$(cat "$root/var/log/fresh-failed-phase")
        exit 1
    fi
    phase=done
}

# Sourced (tools/deb-check.sh reuses pristine_tarball and the mount helpers): define, do not run.
[ "${BASH_SOURCE[0]}" = "$0" ] || return 0

case "${1:-}" in
    --inside) inside ;;
    --enter) enter "$2" ;;
    --pristine) pristine_tarball ;;                       # only make (or find) the cached root
    "") host ;;
    *) die "usage: $0 (no arguments; run as root)" ;;
esac
