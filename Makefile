# dontcache: the few commands everything else is built from.
# `make quick` is the main job on a built-in default; `make test` runs every test.

CARGO ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
SCRATCH ?= /var/tmp/dontcache-quick

.PHONY: setup build test quick bench-dcload clean

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# Release mode: the tests do real I/O and a debug build would make them slow.
test: build
	$(CARGO) test --release --workspace

# A quick benchmark matrix (seq-write, rand-write, seq-read, rand-read x buffered,
# uncached, direct) in a scratch directory, printed as a table.
quick: build
	scripts/quick-matrix.sh $(SCRATCH)

# dcload next to fio 3.33 on the same files (docs/benchmarks.md).
bench-dcload: build
	bench/dcload_vs_fio.py --json bench/dcload-vs-fio.json

clean:
	$(CARGO) clean
