#!/usr/bin/env python3
"""Lists process-wide locks and onces of the library that do not say how they survive a fork.

The engine, the shim and dc-sys run inside programs that fork from any
thread. A child has only the forking thread: a lock another thread held at
the fork, or a `OnceLock` another thread was initialising, stays taken in
the child for good, and the child waits for it for ever. So a `static`
(not thread-local) whose type is a `Mutex`, `RwLock`, `Condvar`, `Once`,
`OnceLock` or `LazyLock` in crates/engine, crates/preload or crates/sys
must say, in a comment within LOOKBACK lines above it, what happens at a
fork: only tried, taken across it, made anew in the child. Values set once
belong in `once_cell::race` cells, which never block. Exits 1 and names each
offender otherwise. Run by `make lint`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CRATES = ("crates/engine/src", "crates/preload/src", "crates/sys/src")
LOOKBACK = 12
STATIC = re.compile(r"^\s*(?:pub(?:\([^)]*\))?\s+)?static\s+(\w+)\s*:\s*([^=]*)")
BLOCKING = re.compile(r"\b(Mutex|RwLock|Condvar|Once|OnceLock|LazyLock)\b")


def offenders(path: Path) -> list[str]:
    lines = path.read_text().splitlines()
    found, depth, local_from = [], 0, None
    for i, line in enumerate(lines):
        if local_from is None and "thread_local!" in line:
            local_from = depth
        depth += line.count("{") - line.count("}")
        if local_from is not None and depth <= local_from and "}" in line:
            local_from = None
            continue
        m = STATIC.match(line)
        if not m or local_from is not None or not BLOCKING.search(m.group(2)):
            continue
        above = lines[max(0, i - LOOKBACK) : i]
        if not any("//" in a and "fork" in a.split("//", 1)[1] for a in above):
            found.append(f"{path.relative_to(ROOT)}:{i + 1}: static {m.group(1)} ({m.group(2).strip()})")
    return found


def main() -> int:
    bad = [o for c in CRATES for p in sorted((ROOT / c).rglob("*.rs")) for o in offenders(p)]
    for o in bad:
        print(f"{o}: say in a comment above it what a fork does to it, or use once_cell::race")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
