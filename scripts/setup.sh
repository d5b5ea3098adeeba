#!/usr/bin/env bash
# Install what building and testing dontcache needs on Debian 12, idempotently.
# Run as root (apt-get); it installs nothing that is already there.
set -euo pipefail

need_apt=()
command -v jq >/dev/null || need_apt+=(jq)
command -v fio >/dev/null || need_apt+=(fio)            # the yardstick dcload is compared with
command -v mkfs.ext4 >/dev/null || need_apt+=(e2fsprogs) # small ext4 images for error injection
command -v losetup >/dev/null || need_apt+=(mount)
command -v mkfs.xfs >/dev/null || need_apt+=(xfsprogs)    # dcbench --fs xfs testbeds and their tests
command -v mkfs.btrfs >/dev/null || need_apt+=(btrfs-progs) # dcbench --fs btrfs
command -v cc >/dev/null || need_apt+=(build-essential)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)  # finds libnfs for the build
[ -f /usr/include/nfsc/libnfs.h ] || need_apt+=(libnfs-dev) # dcload's ioengine=nfs (the library fio's nfs engine uses)
command -v python3 >/dev/null || need_apt+=(python3)
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3-venv) # dcbench's virtualenv
command -v turbostat >/dev/null || need_apt+=(linux-cpupower) # the monitor fio's exec.fio example runs
command -v chromium >/dev/null || need_apt+=(chromium)   # renders dcbench's report in its tests
# fio's fiologparser_hist.py (shipped with Debian's fio) reads dcload's histogram logs in a test.
/usr/bin/python3 -c 'import numpy, pandas' 2>/dev/null || need_apt+=(python3-pandas)

if ((${#need_apt[@]})); then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: need root to install: ${need_apt[*]} (run: sudo $0)" >&2
        exit 1
    fi
    echo "setup: installing ${need_apt[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! command -v cargo >/dev/null; then
    for d in "$HOME/.cargo/bin" /root/.cargo/bin; do
        [ -x "$d/cargo" ] && export PATH="$d:$PATH" && break
    done
fi
if ! command -v cargo >/dev/null; then
    echo "setup: no Rust toolchain found; dontcache needs cargo >= 1.88 (rustup, or Debian's rustc-web/backports)" >&2
    exit 1
fi
rust_minor=$(rustc --version | sed -E 's/^rustc 1\.([0-9]+).*/\1/')
if [ "$rust_minor" -lt 88 ]; then
    echo "setup: $(rustc --version) is too old; dontcache needs Rust >= 1.88" >&2
    exit 1
fi
# make test lints with clippy and checks rustfmt's layout: rustup's default
# profile has both, a minimal one does not.
for tool in clippy rustfmt; do
    if ! cargo "${tool/rustfmt/fmt}" --version >/dev/null 2>&1; then
        if command -v rustup >/dev/null; then
            echo "setup: installing $tool (rustup component add $tool)"
            rustup component add "$tool" >/dev/null
        else
            echo "setup: warning: no cargo ${tool/rustfmt/fmt}; make test needs it (Debian: apt-get install rust-$tool)" >&2
        fi
    fi
done
# dcbench (Python) lives in .venv, installed from python/ (editable, with its
# test extras); reinstalled when python/pyproject.toml changes.
root=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$root/.venv/bin/dcbench" ] || [ "$root/python/pyproject.toml" -nt "$root/.venv/.installed" ]; then
    echo "setup: installing dcbench into .venv (numpy, scipy, matplotlib, rich, jinja2, pytest, ruff, fio-plot from PyPI)"
    python3 -m venv "$root/.venv"
    "$root/.venv/bin/pip" install -q --disable-pip-version-check -e "$root/python[test]"
    touch "$root/.venv/.installed"
fi

echo "setup: ok ($(rustc --version), $(fio --version), jq $(jq --version))"
