# dontcache: the few commands everything else is built from.
# `make quick` is the main job on a built-in default; `make test` runs every test.

CARGO ?= $(shell command -v cargo || echo $(HOME)/.cargo/bin/cargo)
SCRATCH ?= /var/tmp

.PHONY: setup build test lint stress quick bench-dcload clean install

setup:
	@scripts/setup.sh

build: setup
	$(CARGO) build --release --workspace

# Release mode: the tests do real I/O and a debug build would make them slow.
# dcbench's tests run the release dcload.
test: build lint
	$(CARGO) test --release --workspace
	.venv/bin/pytest -q python/tests

# rustfmt's layout (rustfmt.toml), clippy (warnings are errors; it also holds
# the code to rust-version) and ruff (python/pyproject.toml's rules) over
# everything the tests build; no function over 80 lines that does not say
# why it is one piece (scripts/long_functions.py); no process-wide lock or
# once in the library that does not say what a fork does to it
# (scripts/fork_safe_statics.py).
lint: build
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	.venv/bin/ruff check --config python/pyproject.toml python bench scripts
	.venv/bin/python scripts/long_functions.py
	.venv/bin/python scripts/fork_safe_statics.py

# Every Rust test binary two copies at once, twice, output to files
# (scripts/stress_tests.py): what CI's single, piped run does not try.
stress: build
	PATH="$(dir $(CARGO)):$$PATH" .venv/bin/python scripts/stress_tests.py

# The quick benchmark matrix (every scenario x buffered, dontcache, direct,
# writebehind:flusher; page cache limited to 1 GiB) in $(SCRATCH)/dcbench-<run-id>/,
# printed as a table; results in ./results/.
quick: build
	.venv/bin/dcbench run --dir $(SCRATCH)

# dcload next to fio 3.33 on the same files (docs/benchmarks.md).
bench-dcload: build
	bench/dcload_vs_fio.py --json bench/dcload-vs-fio.json

clean:
	$(CARGO) clean

# libdontcache for C programs: header, libraries, pkg-config file, the command.
PREFIX ?= /usr/local
install: build
	install -d $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/dontcache.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 target/release/libdontcache.so target/release/libdontcache_preload.so $(DESTDIR)$(PREFIX)/lib/
	install -m 644 target/release/libdontcache.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 target/release/dontcache target/release/dcload target/release/dcnfsd $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|0.1.0|' include/dontcache.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/dontcache.pc
