"""The run profiles: what a plain ``dcbench run --profile NAME`` runs.

One table: ``--profile``'s choices and its help are made from it. A profile
sets defaults the user's own options override (scenarios, modes,
repetitions, memory, testbed) and may hold options every role's job runs
with, so a comparison it makes is at one engine and depth.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Profile:
    name: str
    help: str
    memory: int | None  # default --memory (None: all of RAM, no balloon)
    max_runtime: float | None  # cap on every role's runtime, seconds
    log_avg_msec: int
    # Defaults for options the user did not give (None: dcbench's own).
    scenarios: str | None = None
    modes: str | None = None
    repeat: int | None = None
    fs: str | None = None
    device: str | None = None
    # dcload options every role's job runs with (over the scenario's own).
    job: dict[str, object] = field(default_factory=dict)


QUICK = Profile("quick", "1 GiB page cache, every role capped at 4 s (about 5 minutes)",
                memory=1 << 30, max_runtime=4.0, log_avg_msec=250)

FULL = Profile("full", "the seed's sizes from all of RAM, no cap", memory=None, max_runtime=None, log_avg_msec=1000)

# The seed's before/after: its writer scenarios, the kernel's RWF_DONTCACHE
# ("before" on 6.14-7.1, "after" on 7.2+) beside buffered and libdontcache's
# flusher (the merged design, on any kernel), on XFS as the seed measured,
# over a loop device with direct I/O. In this machine's sweep the inline
# flush fell behind buffered there (0.58x with 32 writers) and the flusher
# design recovered it (1.55x); on zram the fall was deeper (0.28x) but every
# writeback policy competes with the compression for the same two CPUs
# (docs/benchmarks.md, "Testbeds").
SEED_REPRO = Profile(
    "seed-repro",
    "the seed's writer scenarios in buffered, dontcache and writebehind:flusher, 3 repetitions, roles capped "
    "at 8 s, on a fresh XFS on a loop device in --dir (run it on two kernels and compare)",
    memory=1 << 30, max_runtime=8.0, log_avg_msec=250,
    scenarios="seq-write,multi-write,axboe-write,competing-writers",
    modes="buffered,dontcache,writebehind:flusher", repeat=3, fs="xfs", device="loop")

# libdontcache's speed targets: one stream, four writers and the 32-writer
# test, every mode and every write-behind policy, all at pvsync2 (one
# synchronous write in flight, the library's own path), so the modes differ
# in the mode alone. 4 GiB of page cache makes the stream 8 GiB and the
# four writers 1 GiB each; the 32 writers run 20 s.
ENGINE_POLICIES = Profile(
    "engine-policies",
    "libdontcache's policies beside buffered, dontcache and direct on one stream, 4 writers and 32 writers, "
    "all at pvsync2 QD1, 4 GiB page cache, 3 repetitions, roles capped at 20 s (about 12 minutes)",
    memory=4 << 30, max_runtime=20.0, log_avg_msec=250,
    scenarios="seq-write,multi-write,axboe-write", modes="all", repeat=3, job={"ioengine": "pvsync2"})

PROFILES = {p.name: p for p in (QUICK, FULL, SEED_REPRO, ENGINE_POLICIES)}


def profiles_help() -> str:
    return "; ".join(f"{p.name}: {p.help}" for p in PROFILES.values())
