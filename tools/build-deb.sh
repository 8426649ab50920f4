#!/bin/bash
# make deb: dpkg-buildpackage -b on this tree (debian/), the packages moved into OUT, then lintian
# on them; prints each package's size and the time taken. Usage: tools/build-deb.sh OUT [VERSION]
# (VERSION: the binary packages' version instead of debian/changelog's; make deb-check's older
# build). SWIFT names the toolchain's swift (default: the one on PATH).
set -euo pipefail
out=$1 version=${2:-}
cd "$(dirname "$0")/.."
started=$SECONDS
mkdir -p "$out/debug"
rm -f "$out"/*.deb "$out"/debug/*.deb "$out"/*.changes "$out"/*.buildinfo

# Unsigned, binary packages only (the tree is the source: debian/source/format is native).
VIEWERD_DEB_VERSION="$version" SWIFT="${SWIFT:-swift}" dpkg-buildpackage -b -uc -us

# dpkg-buildpackage leaves what it made beside the tree; debian/files names it (the .changes
# aside), then `debian/rules clean` removes the staging directories.
source_version=$(dpkg-parsechangelog -S Version)
while read -r file _; do mv "../$file" "$out/"; done <debian/files
mv "../viewerd_${source_version}_$(dpkg --print-architecture).changes" "$out/"
debian/rules clean >/dev/null

# Each warning is fixed or overridden with its reason (debian/*.lintian-overrides).
lintian --fail-on error,warning --tag-display-limit 0 "$out"/*.changes
echo "make deb: lintian: no errors, no warnings"
# The detached debug symbols (viewerd-dbgsym…) apart, so that ./*.deb is what a user installs.
mv "$out"/*-dbgsym_*.deb "$out/debug/" 2>/dev/null || true

for deb in "$out"/*.deb; do
    printf 'make deb: %-40s %6s KiB, %6s KiB installed\n' "$(basename "$deb")" \
        "$(( ($(stat -c %s "$deb") + 1023) / 1024 ))" "$(dpkg-deb -f "$deb" Installed-Size)"
done
echo "make deb: built in $((SECONDS - started)) s into $out"
