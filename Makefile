# viewerd — build, run and test. `make run` and `make test` work on a fresh Debian machine
# (README, "A fresh machine": the Swift toolchain, gcc, python3, git, make; `make
# fresh-machine-check` proves it): `deps` installs the C libraries with apt-get.

SWIFT ?= swift
# Every swift call here says --no-color-diagnostics: SwiftPM gives the compiler
# -color-diagnostics when its output is a terminal, and a changed compiler flag rebuilds every
# module (swift-package-manager#8253), so `make run` in a terminal rebuilt all of a build made
# without one, and back. With the flag, a build in a terminal and one in CI are the same build
# (Tests/EndToEndTests/BuildFlagsTests keeps every call here carrying it).
SWIFT_BUILD = $(SWIFT) build --no-color-diagnostics
SWIFT_TEST = $(SWIFT) test --no-color-diagnostics
# Debian packages to build and run: libvips, LMDB and libseccomp (the workers' sandbox) to
# build against, pkg-config to find them, and libjpeg-turbo's headers for the partial decode
# of progressive JPEGs (libvips-dev pulls them in already; named because we link it directly),
# and FFmpeg's libraries for the poster frames and media info of videos (issue 17), and
# libsystemd's sd-bus for the desktop's thumbnail service on D-Bus (issue 21), and LibRaw for
# camera RAW (issue 31), which is C++: its pkg-config file links -lstdc++, whose development
# link (and the headers of raw_extents.cpp) only libstdc++-12-dev brings (a fresh machine has gcc,
# not g++: make fresh-machine-check failed "cannot find -lstdc++" without it), libheif's headers
# (libvips-dev pulls them in; named because a HEIF's thumbnail item is decoded by libheif itself,
# issue 32), and libmicrohttpd for viewerd-http's HTTP/1.1 transport (issue 33).
APT_PACKAGES := libvips-dev liblmdb-dev libseccomp-dev libjpeg62-turbo-dev libheif-dev pkg-config \
	libavformat-dev libavcodec-dev libavutil-dev libswscale-dev libsystemd-dev libraw-dev libstdc++-12-dev \
	libmicrohttpd-dev
# And to test (and bench): libvips-tools (vips, vipsthumbnail) as the reference the tests
# compare against, systemd for systemd-analyze and systemd-socket-activate in the service
# tests, e2fsprogs for the coarse-timestamp file system (mkfs.ext2), libheif-examples for
# heif-enc (a HEIC with a thumbnail item, as phones write: the preview tests and the bench),
# ffmpeg (ffmpeg makes the test and bench clips, ffprobe is the media info reference) and
# ffmpegthumbnailer (the bench's baseline for poster frames); for the desktop's thumbnail
# service (issue 21): dbus (dbus-daemon, dbus-run-session, dbus-monitor), libglib2.0-bin
# (gdbus), python3-gi (GDBus from Python: the conformance tests' client), dbus-user-session
# (the user's dbus.socket, which `systemd-analyze --user verify` wants for a Type=dbus unit),
# tumbler (the bench's baseline), and procps (pgrep: the conformance tests watch a helper's
# process; a minimal Debian has no procps); fontconfig (fc-cache) and fonts-dejavu-core for the
# sandbox's font tests (issue 29: a font directory newer than its cache, a font outside the
# workers' view); binutils (nm: that no product links the fixtures' writers, issue 31); libraw-bin
# (dcraw_emu: the bench's baseline for camera RAW, issue 31).
TEST_APT_PACKAGES := libvips-tools systemd e2fsprogs libheif-examples ffmpeg ffmpegthumbnailer \
	dbus dbus-user-session libglib2.0-bin python3-gi gir1.2-glib-2.0 tumbler procps fontconfig fonts-dejavu-core binutils \
	libraw-bin
# For the HTTP front's end-to-end tests (Tests/HTTP, issue 33): nginx (Debian's real nginx in
# front of two origins, deploy/nginx/viewerd.conf), and for the official IIIF validator (PyPI
# iiif-validator, which make installs with --no-deps into .build/python) its dependencies from
# Debian: python3-pil (it reads every image it is served), python3-lxml, python3-magic (with
# libmagic1) and python3-bottle (it imports them all), and python3-pip to install it; for the
# bench's http part and the torture's: wrk (warm tiles, 16 connections) and iipimage-server
# (IIPImage, the cold tile walk's baseline behind the same nginx).
TEST_APT_PACKAGES += nginx python3-pil python3-lxml python3-magic python3-bottle python3-pip wrk iipimage-server
# For the web gallery's browser tests (Tests/Browser, issue 34): Debian's Chromium, its driver and Selenium.
TEST_APT_PACKAGES += chromium chromium-driver python3-selenium
ARGS ?=

.PHONY: all deps test-deps build debug run test clean install uninstall

all: build

## deps: install missing Debian packages to build and run (does nothing when all are present);
## test-deps: also those the tests and the bench use. One dpkg-query for them all: about 0.1 s
## when nothing is missing (one a package took about 1 s).
deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES)"

test-deps:
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(APT_PACKAGES) $(TEST_APT_PACKAGES)"

.PHONY: apt-install
apt-install:
	@installed=" $$(dpkg-query -W -f='$${Status} $${Package}\n' $(PACKAGES) 2>/dev/null | awk '$$3 == "installed" { printf "%s ", $$4 }')"; \
	missing=""; \
	for p in $(PACKAGES); do case "$$installed" in *" $$p "*) ;; *) missing="$$missing $$p" ;; esac; done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## build: release build of viewerd, viewerctl, viewerd-thumbnailer and viewerd-http (only those products:
## not the bench, torture and test helpers: viewerd-testing, the daemon with the tests' faults,
## is never built here, issue 29). With nothing to build each call takes a few tenths of a second
## (about 1.5 s more when SwiftPM plans again, as it does whenever the environment changed).
build: deps
	$(SWIFT_BUILD) -c release --product viewerd
	$(SWIFT_BUILD) -c release --product viewerctl
	$(SWIFT_BUILD) -c release --product viewerd-thumbnailer
	$(SWIFT_BUILD) -c release --product viewerd-http

debug: deps
	$(SWIFT_BUILD)

## run: start viewerd in the foreground with zero-config defaults (ARGS="--help" for options);
## builds viewerctl too, which the README's tour uses from a second shell
run: build
	exec .build/release/viewerd $(ARGS)

## test: the whole suite (unit tests and end-to-end tests of the real daemon), then the Python
## client's tests (clients/python: codec vectors, and its clients against the debug daemon),
## then the HTTP front's end-to-end tests (Tests/HTTP), then the desktop thumbnail service's
## conformance suite (Tests/Desktop)
# A run that hangs (a test past 20 minutes, or 10 silent) is killed by Tests/watch-tests.py, which first prints
# which tests were running, the processes under them and their threads' stacks.
WATCH_TESTS = python3 Tests/watch-tests.py --test-limit 1200 --quiet-limit 600 --
test: test-deps
	$(SWIFT_BUILD) --build-tests
	$(WATCH_TESTS) $(SWIFT_TEST) --skip-build
	VIEWERD_BUILD_DIR="$$($(SWIFT_BUILD) --show-bin-path)" $(WATCH_TESTS) python3 -m unittest discover -s clients/python/tests -v
	@$(MAKE) --no-print-directory http-tests
	@$(MAKE) --no-print-directory browser-tests
	@$(MAKE) --no-print-directory desktop-conformance

## http-check: only the HTTP front's end-to-end tests (Tests/HTTP, issue 33), after a debug build:
## the official IIIF validator against a live viewerd-http (3.0 and 2.0 at level 2, 0 failures),
## Debian's nginx with deploy/nginx/viewerd.conf in front of two origins. Debian's python3 (its
## python3-pil and the validator's other dependencies); each test starts its own viewerd and
## viewerd-http from the build on loopback ports of their choosing.
HTTP_PYTHON ?= /usr/bin/python3
VALIDATOR_PYTHONPATH = .build/python
IIIF_VALIDATOR = $(VALIDATOR_PYTHONPATH)/iiif_validator/validator.py
.PHONY: http-check http-tests
http-check: test-deps
	$(SWIFT_BUILD)
	@$(MAKE) --no-print-directory http-tests

## http-tests: Tests/HTTP on what is built (make test and make http-check build first)
http-tests: $(IIIF_VALIDATOR)
	VIEWERD_BUILD_DIR="$$($(SWIFT_BUILD) --show-bin-path)" PYTHONPATH="$(abspath $(VALIDATOR_PYTHONPATH))" \
	  $(WATCH_TESTS) $(HTTP_PYTHON) -m unittest discover -s Tests/HTTP -v

## browser-tests: the web gallery in Debian's headless Chromium (Tests/Browser, issue 34) against a
## real viewerd and viewerd-http on loopback; skipped, saying why, only where Chromium cannot start
.PHONY: browser-tests
browser-tests:
	VIEWERD_BUILD_DIR="$$($(SWIFT_BUILD) --show-bin-path)" \
	  $(WATCH_TESTS) $(HTTP_PYTHON) -m unittest discover -s Tests/Browser -v

## The IIIF validator, pinned by its hash (Tests/HTTP/requirements.txt), installed into the build
## tree once (again when that file changes; make clean removes it). Its dependencies are Debian's
## (TEST_APT_PACKAGES), so --no-deps, and --no-build-isolation builds its sdist with Debian's
## setuptools rather than fetching one.
$(IIIF_VALIDATOR): Tests/HTTP/requirements.txt
	rm -rf $(VALIDATOR_PYTHONPATH)
	$(HTTP_PYTHON) -m pip install --quiet --disable-pip-version-check --root-user-action=ignore --no-deps \
	  --no-build-isolation --require-hashes --target $(VALIDATOR_PYTHONPATH) -r Tests/HTTP/requirements.txt
	touch $@

## desktop-conformance: the desktop's thumbnail service (viewerd-thumbnailer, issue 21) driven by
## gdbus and GDBus clients on a session bus of its own (dbus-run-session), with a real viewerd.
## Debian's python3 (python3-gi); skipped, saying why, only where no bus can be started.
DESKTOP_PYTHON ?= /usr/bin/python3
.PHONY: desktop-conformance
desktop-conformance:
	@if ! reason="$$(dbus-run-session --config-file=dbus/private-session.conf -- true 2>&1)"; then \
	  echo "desktop conformance: SKIPPED: no session bus can be started here: $$reason"; \
	elif ! $(DESKTOP_PYTHON) -c 'import gi; gi.require_version("Gio", "2.0")' 2>/dev/null; then \
	  echo "desktop conformance: SKIPPED: $(DESKTOP_PYTHON) has no python3-gi (make test-deps installs it)"; \
	else \
	  VIEWERD_BUILD_DIR="$$($(SWIFT_BUILD) --show-bin-path)" dbus-run-session --config-file=dbus/private-session.conf -- \
	    $(DESKTOP_PYTHON) -m unittest discover -s Tests/Desktop -v; \
	fi

## torture: issue 9. viewerd-torture on a release build (hostile files, hostile clients, load,
## faults, and multi-user as another user when run as root: about 10 minutes on 2 cores), then
## the protocol fuzzer for FUZZ_SECONDS. A short version of the first part runs inside
## `make test` (Tests/EndToEndTests/TortureSmokeTests).
TORTURE_BUILD_PATH ?= .build
TORTURE_ARGS ?=
FUZZ_BUILD_PATH ?= .build/fuzz
FUZZ_SECONDS ?= 300
FUZZ_REGRESSIONS := Tests/ViewerProtocolTests/FuzzRegressions
SANITIZE_BUILD_PATH ?= .build/sanitize

.PHONY: torture torture-deps fuzz sanitize

## torture-deps: what make torture needs beyond make deps: python3 (the hostile-file generator);
## the fuzzer's runtime (libclang_rt.fuzzer) ships with the Swift toolchain, no package needed
torture-deps: test-deps
	@command -v python3 >/dev/null || { SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends python3; }

torture: torture-deps
	$(SWIFT_BUILD) -c release --build-path $(TORTURE_BUILD_PATH)
	$(TORTURE_BUILD_PATH)/release/viewerd-torture --script torture/make-hostile-files.sh $(TORTURE_ARGS)
	$(MAKE) fuzz

## fuzz: libFuzzer over the frame decoder and message parser (torture/fuzz), seeded from
## protocol/vectors, for FUZZ_SECONDS; crash inputs are kept in $(FUZZ_REGRESSIONS)
fuzz: torture-deps
	$(SWIFT_BUILD) -c release --package-path torture/fuzz --build-path $(FUZZ_BUILD_PATH) -Xswiftc -sanitize=fuzzer,address
	rm -rf $(FUZZ_BUILD_PATH)/artifacts && mkdir -p $(FUZZ_BUILD_PATH)/artifacts $(FUZZ_BUILD_PATH)/corpus
	python3 torture/fuzz/seed.py protocol/vectors $(FUZZ_BUILD_PATH)/corpus
	@$(FUZZ_BUILD_PATH)/release/protocol-fuzz -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 \
	  -artifact_prefix=$(abspath $(FUZZ_BUILD_PATH))/artifacts/ -print_final_stats=1 \
	  $(FUZZ_BUILD_PATH)/corpus $(FUZZ_REGRESSIONS) > $(FUZZ_BUILD_PATH)/fuzz.log 2>&1; \
	status=$$?; grep -E "^stat::(number_of_executed_units|new_units_added|peak_rss_mb)|^Done" $(FUZZ_BUILD_PATH)/fuzz.log; \
	kept=0; for f in $(FUZZ_BUILD_PATH)/artifacts/*; do [ -f "$$f" ] || continue; \
	  cp "$$f" $(FUZZ_REGRESSIONS)/ && kept=$$((kept + 1)) && echo "fuzz: kept $(FUZZ_REGRESSIONS)/$$(basename $$f)"; done; \
	if [ $$status -ne 0 ] || [ $$kept -gt 0 ]; then \
	  tail -40 $(FUZZ_BUILD_PATH)/fuzz.log; echo "fuzz: FAILED ($$kept input(s) kept; status $$status)"; exit 1; fi; \
	echo "fuzz: no crash in $(FUZZ_SECONDS) s"

## sanitize: the test suite under ThreadSanitizer, then AddressSanitizer (torture/sanitize.sh)
sanitize: test-deps
	torture/sanitize.sh thread $(SANITIZE_BUILD_PATH)-thread
	torture/sanitize.sh address $(SANITIZE_BUILD_PATH)-address

## install: binaries, units, D-Bus service files, man pages, bash, zsh and fish completion, the web
## gallery, a commented default config.
## Copies what `make build` made and builds nothing (no deps, no swift): `make && sudo make
## install`. Under sudo, Debian's secure_path has no swift, and a build as root would leave
## root-owned files in .build.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR = $(DESTDIR)$(PREFIX)/bin
MANDIR = $(DESTDIR)$(PREFIX)/share/man
UNITDIR = $(DESTDIR)$(PREFIX)/lib/systemd/system
USERUNITDIR = $(DESTDIR)$(PREFIX)/lib/systemd/user
COMPLETIONDIR = $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHCOMPLETIONDIR = $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHCOMPLETIONDIR = $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
DOCDIR = $(DESTDIR)$(PREFIX)/share/doc/viewerd
DBUSDIR = $(DESTDIR)$(PREFIX)/share/dbus-1/services
# viewerd-http's --web-dir (its default when installed in PREFIX/bin: PREFIX/share/viewerd/web).
WEBDIR = $(DESTDIR)$(PREFIX)/share/viewerd/web
# The page's files; its README is for the developers.
GALLERY_FILES = $(filter-out %/README.md,$(wildcard web/gallery/*))

INSTALL_BINARIES = .build/release/viewerd .build/release/viewerctl .build/release/viewerd-thumbnailer .build/release/viewerd-http

install:
	@for bin in $(INSTALL_BINARIES); do [ -x "$$bin" ] || { \
	  echo "make install: $$bin is missing: run make first (as yourself, not root), then sudo make install" >&2; exit 1; }; done
	install -d $(BINDIR) $(MANDIR)/man1 $(MANDIR)/man8 $(UNITDIR) $(USERUNITDIR) $(COMPLETIONDIR) $(ZSHCOMPLETIONDIR) $(FISHCOMPLETIONDIR) $(DOCDIR) $(DBUSDIR)
	install -m 0755 $(INSTALL_BINARIES) $(BINDIR)/
	install -m 0644 docs/man/viewerctl.1 docs/man/viewerd-thumbnailer.1 docs/man/viewerd-http.1 $(MANDIR)/man1/
	install -m 0644 docs/man/viewerd.8 $(MANDIR)/man8/
	install -m 0644 completion/viewerctl.bash $(COMPLETIONDIR)/viewerctl
	install -m 0644 completion/_viewerctl $(ZSHCOMPLETIONDIR)/_viewerctl
	install -m 0644 completion/viewerctl.fish $(FISHCOMPLETIONDIR)/viewerctl.fish
	install -m 0644 README.md protocol/PROTOCOL.md $(DOCDIR)/
	install -d $(WEBDIR)/gallery
	install -m 0644 $(GALLERY_FILES) $(WEBDIR)/gallery/
	# The units name /usr/local/bin: point them at this PREFIX.
	for unit in systemd/*.service systemd/*.socket; do \
	  sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' "$$unit" > $(UNITDIR)/$$(basename "$$unit"); chmod 0644 $(UNITDIR)/$$(basename "$$unit"); done
	for unit in systemd/user/*; do \
	  sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' "$$unit" > $(USERUNITDIR)/$$(basename "$$unit"); chmod 0644 $(USERUNITDIR)/$$(basename "$$unit"); done
	# The desktop's thumbnail service, activated by the session bus (issue 21).
	for service in dbus/*.service; do \
	  sed 's|/usr/local/bin/|$(PREFIX)/bin/|g' "$$service" > $(DBUSDIR)/$$(basename "$$service"); chmod 0644 $(DBUSDIR)/$$(basename "$$service"); done
	install -d $(DESTDIR)$(PREFIX)/lib/sysusers.d $(DESTDIR)$(PREFIX)/lib/tmpfiles.d
	install -m 0644 systemd/sysusers.d/viewerd.conf $(DESTDIR)$(PREFIX)/lib/sysusers.d/viewerd.conf
	install -m 0644 systemd/tmpfiles.d/viewerd.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/viewerd.conf
	if [ -e systemd/viewerd.conf ]; then install -d $(DESTDIR)/etc/viewerd && \
	  { [ -e $(DESTDIR)/etc/viewerd/viewerd.conf ] || install -m 0644 systemd/viewerd.conf $(DESTDIR)/etc/viewerd/; }; fi
	# viewerd-http.service's options (its roots), kept when already there as viewerd.conf is.
	install -d $(DESTDIR)/etc/viewerd
	# Owner only: --sign-key's keys may go in it.
	[ -e $(DESTDIR)/etc/viewerd/http.conf ] || install -m 0600 systemd/http.conf $(DESTDIR)/etc/viewerd/http.conf

## uninstall: removes what install put there (a config you edited stays)
uninstall:
	rm -f $(BINDIR)/viewerd $(BINDIR)/viewerctl $(BINDIR)/viewerd-thumbnailer $(MANDIR)/man1/viewerctl.1 $(MANDIR)/man8/viewerd.8
	rm -f $(MANDIR)/man1/viewerd-thumbnailer.1 $(BINDIR)/viewerd-http $(MANDIR)/man1/viewerd-http.1
	for service in dbus/*.service; do rm -f $(DBUSDIR)/$$(basename "$$service"); done
	rm -f $(COMPLETIONDIR)/viewerctl $(ZSHCOMPLETIONDIR)/_viewerctl $(FISHCOMPLETIONDIR)/viewerctl.fish
	rm -rf $(DOCDIR) $(WEBDIR)
	rmdir $(DESTDIR)$(PREFIX)/share/viewerd 2>/dev/null || true
	for unit in systemd/*.service systemd/*.socket; do rm -f $(UNITDIR)/$$(basename "$$unit"); done
	for unit in systemd/user/*; do rm -f $(USERUNITDIR)/$$(basename "$$unit"); done
	rm -f $(DESTDIR)$(PREFIX)/lib/sysusers.d/viewerd.conf $(DESTDIR)$(PREFIX)/lib/tmpfiles.d/viewerd.conf

clean:
	rm -rf .build

.PHONY: deb deb-check

## deb: the Debian packages (issue 35, debian/): viewerd (the daemon, viewerctl, the units,
## sysusers and tmpfiles, /etc/viewerd/viewerd.conf), viewerd-desktop (viewerd-thumbnailer and its
## D-Bus and user unit files), viewerd-http and python3-viewerd, in DEB_DIR with the .changes,
## then lintian on them (no error, no warning: each remaining one is overridden in debian/ with
## its reason). The Swift runtime is linked in (--static-swift-stdlib): they install on Debian 12
## without the toolchain. Builds with dpkg-buildpackage, which needs debhelper, dh-python and
## build-essential; the Swift build is kept in DEB_DIR/swift, so the next `make deb` builds
## only what changed. DEB_VERSION gives the packages another version (deb-check's older build).
DEB_DIR ?= .build/deb
DEB_VERSION ?=
DEB_APT_PACKAGES := build-essential debhelper dpkg-dev dh-python python3-all lintian
deb: deps
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(DEB_APT_PACKAGES)"
	SWIFT="$(SWIFT)" tools/build-deb.sh $(DEB_DIR) $(DEB_VERSION)

## deb-check: the packages as a user gets them (tools/deb-check.sh), in a fresh Debian 12 root
## (debootstrap minbase, cached in DEB_CHECK_DIR, no Swift toolchain): install a build of this
## tree as an older version, render through the socket-activated system service, upgrade to
## `make deb`'s packages, render again (a hit), remove, purge, and nothing left but the viewerd
## user and group. Run as root; builds both versions first.
DEB_CHECK_DIR ?= /var/tmp/viewerd-deb-check
DEB_PREVIOUS_VERSION ?= $(shell dpkg-parsechangelog -S Version 2>/dev/null)~prev
deb-check: deb
	@$(MAKE) --no-print-directory apt-install PACKAGES=debootstrap
	SWIFT="$(SWIFT)" tools/build-deb.sh $(DEB_DIR)/previous $(DEB_PREVIOUS_VERSION)
	DEB_CHECK_DIR=$(DEB_CHECK_DIR) tools/deb-check.sh $(DEB_DIR)/previous $(DEB_DIR)

.PHONY: bench bench-smoke bench-browser

## bench: the benchmarks of BENCHMARKS.md (fetches its corpus; about 13 minutes on 2 cores after the build),
## then the browser part
bench: test-deps
	$(SWIFT_BUILD) -c release
	bench/fetch-corpus.sh
	.build/release/viewerd-bench
	$(HTTP_PYTHON) bench/browser-bench.py --build-dir .build/release

## bench-browser: only the browser part (bench/browser-bench.py, issue 34): the web gallery in
## Debian's headless Chromium against the release viewerd and viewerd-http, beside the same page
## as static files served by Debian's nginx; a table and bench-results/browser-<UTC time>.json.
## About 5 minutes after the build, and a few minutes once to make its 10,000-photo album (kept in
## ~/.cache/viewerd-browser-bench, 1.8 GB).
bench-browser: test-deps
	$(SWIFT_BUILD) -c release --product viewerd
	$(SWIFT_BUILD) -c release --product viewerd-http
	$(HTTP_PYTHON) bench/browser-bench.py --build-dir .build/release

## bench-smoke: the bench harness on a tiny generated corpus (well under a minute; no figures)
bench-smoke: test-deps
	$(SWIFT_BUILD) -c release
	.build/release/viewerd-bench --smoke

.PHONY: fresh-machine-check

## fresh-machine-check: README's two commands on a brand-new Debian machine (issue 29): a
## bookworm minbase root made by debootstrap (cached in FRESH_DIR, default /var/tmp/viewerd-fresh;
## every run starts from the pristine copy) plus only what README's "A fresh machine" lists, the
## host's /opt/swift bind-mounted read-only, a clean clone of HEAD; inside, as root with no
## terminal, `make run` until `viewerctl ping` answers and a clean exit on SIGTERM, then the
## whole `make test`. Prints each phase's time and `fresh-machine-check: PASSED in N s` (or
## FAILED and the phase); log in FRESH_DIR/logs. Run as root; slow (a whole build and test
## suite). Not part of `make test`: run it before resolving an issue that changes what is
## installed or how the tests start.
fresh-machine-check:
	tools/fresh-machine-check.sh

.PHONY: thunar-check

## thunar-check: issue 21's real file manager check (bench/thunar-check.py): Debian's Thunar
## under Xvfb opens a folder of 31 photos (then the photos and 4 videos) in its icon view with
## thumbnails always on, with viewerd-thumbnailer and with Tumbler as the session's thumbnailer,
## THUNAR_CHECK_ARGS="--runs 3" each; prints the seconds from Thunar's start to the last
## thumbnail on disk, the files lost, what Thunar queued, and a screenshot verdict (every icon
## shows its file's own thumbnail). Exit 1 when viewerd lost a file or failed the screenshot.
## About 2 to 4 minutes on 2 cores after the build (30 s more for each run that loses a file),
## and a minute or two once to make the files (kept in ~/.cache/viewerd-thunar-check).
## Beyond test-deps: thunar and xfconf (xfconfd), xvfb, x11-apps (xwd), imagemagick (convert),
## xdotool (the pointer out of the view), python3-numpy and gir1.2-gdkpixbuf-2.0 (the
## screenshot's comparison, in Debian's /usr/bin/python3 for gi).
THUNAR_CHECK_APT_PACKAGES := thunar xfconf xvfb x11-apps imagemagick xdotool python3-numpy gir1.2-gdkpixbuf-2.0
THUNAR_CHECK_ARGS ?=

thunar-check: test-deps
	@$(MAKE) --no-print-directory apt-install PACKAGES="$(THUNAR_CHECK_APT_PACKAGES)"
	$(SWIFT_BUILD) -c release
	/usr/bin/python3 bench/thunar-check.py --build-dir .build/release $(THUNAR_CHECK_ARGS)
