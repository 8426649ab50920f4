#!/bin/bash
# make deb-check (issue 35): the Debian packages as a user meets them, in a fresh Debian 12 root
# (debootstrap --variant=minbase, no Swift toolchain, nothing of this tree but the .deb files):
#
#   1. the packages' dependencies from the mirror (apt-get satisfy), then a listing of the root:
#      what the purge must come back to;
#   2. apt install ./*.deb of the PREVIOUS build (this tree at a lower version): the viewerd user,
#      its store directory, the per-user socket enabled for every user, the system service not;
#   3. a render through the socket-activated system service: systemd-socket-activate binds the
#      unit's ListenStream= and runs its ExecStart= as its User= (systemd is not PID 1 in a root);
#   4. the admin edits /etc/viewerd/viewerd.conf; apt install ./*.deb of the CURRENT build (an
#      upgrade): the edit is kept, and the same render is a hit from the store the previous
#      package wrote; viewerd-http serves the packaged web gallery (GET /gallery/ over loopback);
#   5. apt install ./*.deb of the PREVIOUS build again (a downgrade): the same render answers,
#      rendered or from the store, and the daemon logs no damaged store;
#   6. apt remove (the conffiles and the store stay), apt purge; then the root's listing again:
#      nothing left but the viewerd user and group (Debian leaves system users in place).
#
# Usage (as root): tools/deb-check.sh PREVIOUS_DIR CURRENT_DIR, each holding a build's .deb files.
# DEB_CHECK_DIR (default /var/tmp/viewerd-deb-check) holds the cached pristine root, the run's
# root and the logs. The root is entered as tools/fresh-machine-check.sh enters its own (mount and
# PID namespaces, pivot_root); its functions make and cache the root.
set -euo pipefail

# The fresh-machine check's functions: its cached pristine root (pristine_tarball), the mounts and
# pivot_root into a root, the mount helpers. Sourced first: what follows defines this check's own.
# shellcheck source=tools/fresh-machine-check.sh
source "$(dirname "$0")/fresh-machine-check.sh"

CHECK_DIR=/srv/deb-check                 # inside the root: the packages, this script, the logs
PACKAGES="viewerd viewerd-desktop viewerd-http python3-viewerd"
PHOTO=/srv/photos/photo.png

log() { echo "deb-check: $*"; }
die() { log "$*" >&2; exit 2; }
fail() { log "FAILED: $*"; exit 1; }
ok() { log "  ok: $*"; }

# ---------------------------------------------------------------------------------------------
# Inside the root.
# ---------------------------------------------------------------------------------------------

# Everything on the root's file system but what apt and dpkg keep for themselves (their state,
# caches and logs) and this check's own files: a path per line, with a checksum for files
# under /etc (where a change of content is what counts).
listing() {
    find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp \
        -o -path /var/lib/dpkg -o -path /var/lib/apt -o -path /var/cache/apt -o -path /var/cache/debconf \
        -o -path /var/cache/ldconfig -o -path /var/log -o -path "$CHECK_DIR" -o -path /srv/photos \) -prune \
        -o -printf '%y %m %u:%g %p\n' | sort -k4
    find /etc -xdev -type f -exec sha256sum {} + | sort -k2
}

# (dpkg-query fails for a package it no longer knows: python3-viewerd after its removal)
versions() { { dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\n' $PACKAGES 2>/dev/null || true; } | sort; }

# The system service as systemd would start it on viewerd.socket's first connection: the
# socket unit's ListenStream=, FileDescriptorName= and the service's ExecStart=, User=, Group=,
# CacheDirectory= and RuntimeDirectory= read from the installed units.
daemon_pid=""
start_service() {
    local socket=/lib/systemd/system/viewerd.socket service=/lib/systemd/system/viewerd.service
    local listen fdname exec_start user group
    listen=$(sed -n 's/^ListenStream=//p' "$socket")
    fdname=$(sed -n 's/^FileDescriptorName=//p' "$socket")
    exec_start=$(sed -n 's/^ExecStart=//p' "$service")
    user=$(sed -n 's/^User=//p' "$service"); group=$(sed -n 's/^Group=//p' "$service")
    install -d -o "$user" -g "$group" -m 0755 /run/viewerd
    install -d -o "$user" -g "$group" -m 0700 /var/cache/viewerd
    # shellcheck disable=SC2086 # ExecStart= is split at spaces, as systemd splits it
    systemd-socket-activate --listen="$listen" --fdname="$fdname" \
        --setenv=CACHE_DIRECTORY=/var/cache/viewerd --setenv=RUNTIME_DIRECTORY=/run/viewerd \
        setpriv --reuid="$user" --regid="$group" --init-groups -- $exec_start \
        >>"$CHECK_DIR/viewerd.log" 2>&1 &
    daemon_pid=$!
    local tries=0
    until [ -S "$listen" ]; do
        tries=$((tries + 1)); [ "$tries" -lt 100 ] || fail "systemd-socket-activate did not bind $listen"
        sleep 0.1
    done
    chgrp "$group" "$listen"; chmod 0660 "$listen"     # SocketGroup=, SocketMode=
    log "  systemd-socket-activate --listen=$listen --fdname=$fdname ... setpriv --reuid=$user -- $exec_start (pid $daemon_pid)"
}

stop_service() {
    kill -TERM "$daemon_pid"
    local status=0; wait "$daemon_pid" || status=$?
    [ "$status" -eq 0 ] || { tail -n 20 "$CHECK_DIR/viewerd.log"; fail "viewerd exited with status $status on SIGTERM"; }
    ok "viewerd exited 0 on SIGTERM"
}

# viewerd-http on a free loopback port against the running service, with its default --web-dir
# (the packaged /usr/share/viewerd/web): GET /gallery/ must answer the packaged page, /healthz
# "ok" (the front reached the daemon).
check_gallery() {
    local page=/usr/share/viewerd/web/gallery/index.html address="" tries=0 pid
    dpkg -L viewerd-http | grep -q -x "$page" || fail "viewerd-http's package has no $page"
    viewerd-http --listen 127.0.0.1:0 --socket /run/viewerd/viewerd.sock >"$CHECK_DIR/viewerd-http.log" 2>&1 &
    pid=$!
    until [ -n "$address" ]; do
        tries=$((tries + 1))
        [ "$tries" -lt 100 ] && kill -0 "$pid" 2>/dev/null || { cat "$CHECK_DIR/viewerd-http.log"; fail "viewerd-http did not listen"; }
        sleep 0.1
        address=$(sed -n 's/.*event=listening address=\([0-9.:]*\).*/\1/p' "$CHECK_DIR/viewerd-http.log")
    done
    python3 - "http://$address" "$page" <<'EOF_PY' || { kill "$pid"; cat "$CHECK_DIR/viewerd-http.log"; fail "GET /gallery/ or /healthz"; }
import sys, urllib.request
base, page = sys.argv[1], sys.argv[2]
with urllib.request.urlopen(base + "/gallery/", timeout=10) as answer:
    body = answer.read()
    assert answer.status == 200, answer.status
    assert body == open(page, "rb").read(), "/gallery/ is not the packaged index.html"
    print(f"deb-check:   GET {base}/gallery/: {answer.status}, {len(body)} bytes, {answer.headers['Content-Type']}")
with urllib.request.urlopen(base + "/healthz", timeout=10) as answer:
    body = answer.read().decode().strip()
    assert (answer.status, body) == (200, "ok"), (answer.status, body)
    print(f"deb-check:   GET {base}/healthz: {answer.status} {body}")
EOF_PY
    kill -TERM "$pid"
    local status=0; wait "$pid" || status=$?
    [ "$status" -eq 0 ] || fail "viewerd-http exited with status $status on SIGTERM"
    ok "viewerd-http serves the packaged gallery from its default --web-dir, and exited 0 on SIGTERM"
}

render() {
    local line
    line=$(viewerctl --socket /run/viewerd/viewerd.sock render "$PHOTO" --size 256 -o "/tmp/thumb-$1.jpg" 2>&1) ||
        { tail -n 20 "$CHECK_DIR/viewerd.log"; fail "viewerctl render: $line"; }
    log "  viewerctl render $PHOTO --size 256: $line"
    # $2: what the line must say in parentheses, an extended regex (rendered|from cache: either)
    if grep -q -E "\(($2)\)" <<<"$line"; then ok "the render says ($2)"; else fail "expected ($2)"; fi
}

inside() {
    cd "$CHECK_DIR"
    export DEBIAN_FRONTEND=noninteractive
    log "inside: $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) cores, no Swift toolchain: $(command -v swift || echo "no swift on PATH")"
    local started=$SECONDS

    log "== 1. the packages' dependencies from the mirror"
    local depends
    depends=$(for deb in previous/*.deb; do dpkg-deb -f "$deb" Depends; echo; done | tr ',' '\n' |
        sed 's/^ *//; /^$/d' | grep -v -E '^(viewerd|viewerd-desktop|viewerd-http|python3-viewerd)( |$)' | sort -u | paste -sd, -)
    log "  apt-get satisfy \"$depends\""
    apt-get update -qq
    apt-get satisfy -y -qq --no-install-recommends "$depends" >"$CHECK_DIR/apt-satisfy.log" 2>&1 ||
        { tail -n 30 "$CHECK_DIR/apt-satisfy.log"; fail "the dependencies did not install"; }
    ok "$(grep -c '^Setting up' "$CHECK_DIR/apt-satisfy.log") packages from the mirror"
    listing >"$CHECK_DIR/before.txt"

    log "== 2. install the previous build: apt install ./previous/*.deb"
    apt-get install -y -qq --no-install-recommends ./previous/*.deb 2>&1 | grep -v -E '^(Selecting|Preparing|Unpacking|\(Reading)' || true
    versions | sed 's/^/deb-check:   /'
    [ "$(versions | grep -c ' ii $')" -eq 4 ] || fail "not every package is installed"
    for bin in /usr/bin/viewerd /usr/bin/viewerctl /usr/bin/viewerd-thumbnailer /usr/bin/viewerd-http; do
        if ldd "$bin" | grep -q 'not found'; then fail "$bin: $(ldd "$bin" | grep 'not found')"; fi
        if ldd "$bin" | grep -q -i swift; then fail "$bin links a Swift library: $(ldd "$bin" | grep -i swift)"; fi
    done
    ok "the four binaries find every library, none of them Swift's"
    getent passwd viewerd >/dev/null || fail "no user viewerd"
    ok "sysusers: $(getent passwd viewerd)"
    [ "$(stat -c '%U:%G %a' /var/cache/viewerd)" = "viewerd:viewerd 700" ] || fail "/var/cache/viewerd: $(stat -c '%U:%G %a' /var/cache/viewerd)"
    ok "tmpfiles: /var/cache/viewerd viewerd:viewerd 0700"
    [ -L /etc/systemd/user/sockets.target.wants/viewerd.socket ] || fail "the per-user socket is not enabled"
    ok "per-user viewerd.socket enabled for every user: $(readlink /etc/systemd/user/sockets.target.wants/viewerd.socket)"
    [ ! -e /etc/systemd/system/sockets.target.wants/viewerd.socket ] || fail "the system viewerd.socket is enabled"
    [ ! -e /etc/systemd/system/sockets.target.wants/viewerd-http.socket ] || fail "viewerd-http.socket is enabled"
    ok "system viewerd.socket and viewerd-http.socket installed, not enabled"
    [ "$(stat -c '%a' /etc/viewerd/http.conf)" = 600 ] || fail "/etc/viewerd/http.conf is $(stat -c '%a' /etc/viewerd/http.conf)"
    ok "/etc/viewerd/http.conf 0600"
    python3 -c 'import viewerd, sys; sys.stdout.write(viewerd.__file__ + "\n")' >/tmp/python-client || fail "python3 -c 'import viewerd'"
    ok "python3-viewerd: $(cat /tmp/python-client)"

    log "== 3. a render through the socket-activated system service"
    start_service
    render 1 rendered
    viewerctl --socket /run/viewerd/viewerd.sock status 2>&1 | sed -n 's/^/deb-check:   /; /cache  /p; /sandbox  /p' || true
    stop_service

    log "== 4. the admin edits viewerd.conf; upgrade: apt install ./current/*.deb"
    echo "# kept across upgrades (deb-check)" >>/etc/viewerd/viewerd.conf
    apt-get install -y -qq --no-install-recommends ./current/*.deb 2>&1 | grep -v -E '^(Selecting|Preparing|Unpacking|\(Reading)' || true
    versions | sed 's/^/deb-check:   /'
    local current; current=$(dpkg-deb -f current/viewerd_*.deb Version)
    [ "$(dpkg-query -W -f='${Version}' viewerd)" = "$current" ] || fail "viewerd is not at $current after the upgrade"
    grep -q '^# kept across upgrades (deb-check)$' /etc/viewerd/viewerd.conf || fail "the upgrade overwrote the edited /etc/viewerd/viewerd.conf"
    ok "the edited /etc/viewerd/viewerd.conf is kept"
    start_service
    render 2 "from cache"
    if ls -d /var/cache/viewerd/store.broken-* >/dev/null 2>&1; then fail "the upgrade moved the store aside"; fi
    ok "the store the previous package wrote is the one in use (no store.broken-*)"
    check_gallery
    stop_service

    log "== 5. downgrade: apt install --allow-downgrades ./previous/*.deb"
    apt-get install -y -qq --no-install-recommends --allow-downgrades ./previous/*.deb 2>&1 |
        grep -v -E '^(Selecting|Preparing|Unpacking|\(Reading)' || true
    versions | sed 's/^/deb-check:   /'
    local previous; previous=$(dpkg-deb -f previous/viewerd_*.deb Version)
    [ "$(dpkg-query -W -f='${Version}' viewerd)" = "$previous" ] || fail "viewerd is not at $previous after the downgrade"
    local logged; logged=$(wc -l <"$CHECK_DIR/viewerd.log")
    start_service
    render 3 "rendered|from cache"
    stop_service
    # The store the newer package wrote is either read (the same schema) or moved aside whole
    # (a newer one), never read as damaged.
    local store_faults
    store_faults=$(tail -n "+$((logged + 1))" "$CHECK_DIR/viewerd.log" | grep -E 'event=store-(read|write)-failed|corrupt' || true)
    [ -z "$store_faults" ] || { echo "$store_faults"; fail "the older daemon reported a damaged store"; }
    ok "the older daemon answered from the newer package's store: $(ls -d /var/cache/viewerd/store* | tr '\n' ' ')"

    log "== 6. remove, then purge"
    apt-get remove -y -qq $PACKAGES 2>&1 | grep -v '^(Reading' || true
    [ ! -e /usr/bin/viewerd ] || fail "/usr/bin/viewerd is still there after the removal"
    [ -e /etc/viewerd/viewerd.conf ] || fail "the removal took the conffile"
    versions | sed 's/^/deb-check:   /'
    ok "removed: binaries gone, conffiles and the store kept (status rc)"
    # Only those dpkg still knows: apt cannot find a removed package that had no conffiles.
    apt-get purge -y -qq $(versions | awk '$3 == "rc" { print $1 }') 2>&1 | grep -v '^(Reading' || true
    [ -z "$(versions | grep -v ' un $' || true)" ] || fail "still known to dpkg after the purge: $(versions)"
    listing >"$CHECK_DIR/after.txt"
    # What may stay: the system user and group (and the backups the tools that add them keep).
    local left
    left=$(diff "$CHECK_DIR/before.txt" "$CHECK_DIR/after.txt" | grep '^[<>]' |
        grep -v -E ' /etc/(passwd|group|shadow|gshadow)-?$' || true)
    if [ -n "$left" ]; then echo "$left" | sed 's/^/deb-check:   /'; fail "the purge left the above behind"; fi
    ok "after the purge the root is as before the install, but for the viewerd user and group: $(getent passwd viewerd)"
    log "inside: passed in $((SECONDS - started)) s"
}

# ---------------------------------------------------------------------------------------------
# In the namespace: mounts, pivot_root (as tools/fresh-machine-check.sh, without the toolchain).
# ---------------------------------------------------------------------------------------------

enter() {
    mount_root_basics "$1"
    pivot_into "$1"
    exec env -i HOME=/root USER=root LOGNAME=root SHELL=/bin/bash LANG=C.UTF-8 \
        PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        /bin/bash "$CHECK_DIR/deb-check.sh" --inside </dev/null
}

# ---------------------------------------------------------------------------------------------
# On the host.
# ---------------------------------------------------------------------------------------------

# A PNG of W x H (a gradient), written with the standard library only.
make_photo() {
    python3 - "$1" <<'EOF'
import struct, sys, zlib
w, h = 1200, 800
rows = b"".join(b"\0" + bytes(v for x in range(w) for v in (x * 255 // w, y * 255 // h, 128)) for y in range(h))
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
png = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) \
    + chunk(b"IDAT", zlib.compress(rows, 6)) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(png)
EOF
}

host() {
    [ "$(id -u)" -eq 0 ] || die "run as root (debootstrap, mounts and namespaces need it)"
    [ $# -eq 2 ] || die "usage: $0 PREVIOUS_DIR CURRENT_DIR (each with a build's .deb files)"
    local previous current
    previous=$(cd "$1" && pwd) current=$(cd "$2" && pwd)
    compgen -G "$previous/viewerd_*.deb" >/dev/null || die "no viewerd_*.deb in $previous"
    compgen -G "$current/viewerd_*.deb" >/dev/null || die "no viewerd_*.deb in $current"
    local here; here=$(cd "$(dirname "$0")" && pwd)
    # A root of minbase alone (not even the toolchain's libraries), cached apart from the
    # fresh-machine check's.
    FRESH_DIR=${DEB_CHECK_DIR:-/var/tmp/viewerd-deb-check}
    FRESH_PACKAGES=""
    mkdir -p "$FRESH_DIR/logs"
    logfile=$FRESH_DIR/logs/deb-check-$(date -u +%Y%m%dT%H%M%SZ).log
    exec > >(tee "$logfile") 2>&1
    log "log: $logfile"
    started=$SECONDS root=$FRESH_DIR/root ns_pid=""
    finish() {
        local status=$?
        if [ -n "$ns_pid" ] && kill -0 "$ns_pid" 2>/dev/null; then kill -KILL "$ns_pid" 2>/dev/null || true; wait "$ns_pid" 2>/dev/null || true; fi
        unmount_all_under "$root"; unmount_all_under "$FRESH_DIR/pristine-build"
        if [ "$status" -eq 0 ]; then log "PASSED in $((SECONDS - started)) s"; else log "FAILED in $((SECONDS - started)) s (log: $logfile)"; fi
    }
    trap finish EXIT
    trap 'exit 130' INT TERM HUP

    local tarball; tarball=$(pristine_tarball)
    unmount_all_under "$root"; rm -rf "$root"; mkdir -p "$root"
    tar -C "$root" --numeric-owner --xattrs -xpf "$tarball"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    [ -e "$root/etc/hosts" ] || cp /etc/hosts "$root/etc/hosts"
    mkdir -p "$root$CHECK_DIR/previous" "$root$CHECK_DIR/current" "$(dirname "$root$PHOTO")"
    cp "$previous"/*.deb "$root$CHECK_DIR/previous/"
    cp "$current"/*.deb "$root$CHECK_DIR/current/"
    # apt reads local packages as its unprivileged _apt user
    chmod -R a+rX "$root$CHECK_DIR"
    cp "$here/deb-check.sh" "$here/fresh-machine-check.sh" "$root$CHECK_DIR/"
    make_photo "$root$PHOTO"
    log "root: $(basename "$tarball") unpacked; previous: $(cd "$previous" && ls -- *.deb | tr '\n' ' ')"
    log "current: $(cd "$current" && ls -- *.deb | tr '\n' ' ')"

    local status=0
    unshare --mount --pid --fork --kill-child -- "$0" --enter "$root" &
    ns_pid=$!
    wait "$ns_pid" || status=$?
    ns_pid=""
    [ "$status" -eq 0 ] || exit 1
}

case "${1:-}" in
    --inside) inside ;;
    --enter) enter "$2" ;;
    *) host "$@" ;;
esac
