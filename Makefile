# viewerd — build, run and test. `make run` and `make test` work on a fresh Debian machine
# with only the Swift toolchain: `deps` installs the C libraries with apt-get.

SWIFT ?= swift
# Debian packages: libvips and LMDB to build against, pkg-config to find them,
# libvips-tools (vipsthumbnail) as the reference the tests compare against.
APT_PACKAGES := libvips-dev liblmdb-dev pkg-config libvips-tools
ARGS ?=

.PHONY: all deps build debug run test clean

all: build

## deps: install missing Debian packages (does nothing when all are present)
deps:
	@missing=""; \
	for p in $(APT_PACKAGES); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "install ok installed" || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  echo "make deps: installing$$missing"; \
	  SUDO=""; [ "$$(id -u)" -ne 0 ] && SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing; \
	fi

## build: release build of viewerd and viewerctl
build: deps
	$(SWIFT) build -c release

debug: deps
	$(SWIFT) build

## run: start viewerd in the foreground with zero-config defaults (ARGS="--help" for options)
run: build
	exec .build/release/viewerd $(ARGS)

## test: the whole suite (unit tests and end-to-end tests of the real daemon)
test: deps
	$(SWIFT) build --build-tests
	$(SWIFT) test --skip-build

clean:
	rm -rf .build
