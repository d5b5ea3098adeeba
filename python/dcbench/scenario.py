"""Scenarios as data: ``scenarios/*.toml``, validated on load.

A scenario is a set of roles that run together in one dcload invocation.
Each role is one dcload job section (``numjobs`` = ``count``) with a sizing
rule for its files and the mode it runs in: ``test`` (the mode under test)
or ``buffered`` (always buffered: the readers of noisy-neighbor-mixed, the
competing buffered writer). What is known about a scenario is in its file:
where ``dcbench run`` puts it (``order``) and which modes' figures a change
to uncached I/O should not move (``controls``). See docs/results.md,
"Scenario files", for the format.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from .errors import UserError
from .sizes import check_rule, evaluate_rule, parse_size

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "scenarios"

# dcload options a scenario may not set: dcbench owns file placement, the
# mode, output and logs.
RESERVED_OPTIONS = {
    "filename", "directory", "filename_format", "size", "numjobs", "direct", "buffered",
    "uncached", "writebehind", "output", "output-format", "write_bw_log", "write_lat_log",
    "write_iops_log", "log_avg_msec", "name", "runtime", "time_based", "exitall", "exit_what", "new_group",
    "group_reporting", "stonewall", "nrfiles", "filesize",
}
ROLE_KEYS = {"name", "mode", "count", "size", "precreate", "runtime", "until", "job", "files_per_job"}
SCENARIO_KEYS = {"description", "origin", "role", "modes", "order", "controls"}
MODE_FAMILIES = ("buffered", "dontcache", "direct", "writebehind")
ROLE_MODES = ("test", "buffered")


@dataclass(frozen=True)
class Role:
    name: str
    mode: str  # "test" or "buffered"
    count: int
    size: str  # sizing rule, per file
    job: dict[str, object]
    precreate: bool = False
    runtime: float | None = None  # seconds, time-based
    until: str | None = None  # time-based until this role ends
    files_per_job: int | None = None  # small-files: this many new files per job (size each)

    @property
    def direction(self) -> str:
        rw = str(self.job.get("rw", "read"))
        return "write" if "write" in rw or rw in ("trim",) else "read"

    def file_bytes(self, mem: int) -> int:
        return evaluate_rule(self.size, mem)

    def total_bytes(self, mem: int) -> int:
        return self.file_bytes(mem) * (self.files_per_job or 1) * self.count


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    origin: str
    roles: tuple[Role, ...]
    # Mode families this scenario runs in; default all.
    modes: tuple[str, ...] = MODE_FAMILIES
    # Its place in ``all`` (None: after the numbered ones, by name).
    order: int | None = None
    # Mode families whose figures a change to uncached I/O should not move:
    # compare's control cases.
    controls: tuple[str, ...] = ("direct",)

    def total_bytes(self, mem: int) -> int:
        return sum(r.total_bytes(mem) for r in self.roles)

    def with_job(self, options: dict[str, object]) -> Scenario:
        """This scenario with ``options`` set in every role's job."""
        if not options:
            return self
        return replace(self, roles=tuple(replace(r, job={**r.job, **options}) for r in self.roles))

    @property
    def is_write(self) -> bool:
        return any(r.direction == "write" and not r.precreate for r in self.roles)


def _duration(v: object, where: str) -> float:
    if isinstance(v, (int, float)) and v > 0:
        return float(v)
    if isinstance(v, str):
        t = v.strip().lower()
        for suffix, scale in (("ms", 1e-3), ("s", 1), ("m", 60), ("h", 3600)):
            if t.endswith(suffix):
                try:
                    x = float(t[: -len(suffix)]) * scale
                except ValueError:
                    break
                if x > 0:
                    return x
                break
    raise UserError(f"{where}: {v!r} is not a duration (like 20s, 5m or 300)")


def _role(d: dict, where: str) -> Role:
    if not isinstance(d, dict):
        raise UserError(f"{where}: each [[role]] must be a table")
    unknown = set(d) - ROLE_KEYS
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; a role has {', '.join(sorted(ROLE_KEYS))}")
    name = d.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise UserError(f"{where}: role name must be a word (letters, digits, _), got {name!r}")
    where = f"{where} role {name!r}"
    mode = d.get("mode", "test")
    if mode not in ROLE_MODES:
        raise UserError(f"{where}: mode must be 'test' (the mode under test) or 'buffered', got {mode!r}")
    count = d.get("count", 1)
    if not isinstance(count, int) or not 1 <= count <= 256:
        raise UserError(f"{where}: count must be an integer 1..256, got {count!r}")
    size = d.get("size")
    try:
        check_rule(size)
    except ValueError as e:
        raise UserError(f"{where}: size: {e}") from None
    job = d.get("job", {})
    if not isinstance(job, dict) or "rw" not in job:
        raise UserError(f"{where}: [role.job] must be a table of dcload options with at least rw=")
    reserved = set(job) & RESERVED_OPTIONS
    if reserved:
        raise UserError(f"{where}: job sets {', '.join(sorted(reserved))}, which dcbench controls")
    for k, v in job.items():
        if not isinstance(v, (str, int, float, bool)):
            raise UserError(f"{where}: job option {k} must be a string or number")
    if "bs" in job:
        try:
            parse_size(str(job["bs"]))
        except ValueError as e:
            raise UserError(f"{where}: bs: {e}") from None
    runtime = _duration(d["runtime"], f"{where}: runtime") if "runtime" in d else None
    until = d.get("until")
    if until is not None and not isinstance(until, str):
        raise UserError(f"{where}: until must name another role")
    if until and runtime:
        raise UserError(f"{where}: give runtime or until, not both")
    files = d.get("files_per_job")
    if files is not None and (not isinstance(files, int) or isinstance(files, bool) or files < 2):
        raise UserError(f"{where}: files_per_job must be a whole number of at least 2")
    if files and (job.get("rw") != "write" or runtime or until):
        raise UserError(f"{where}: files_per_job writes each new file once: it needs rw=write and no runtime/until")
    precreate = d.get("precreate", False)
    if not isinstance(precreate, bool):
        raise UserError(f"{where}: precreate must be true or false")
    return Role(
        name=name, mode=mode, count=count, size=size, job=dict(job), precreate=precreate,
        runtime=runtime, until=until, files_per_job=files,
    )


def parse_scenario(name: str, text: str, where: str | None = None) -> Scenario:
    where = where or f"scenario {name}"
    try:
        d = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{where}: not valid TOML: {e}") from None
    unknown = set(d) - SCENARIO_KEYS
    if unknown:
        raise UserError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}; a scenario has {', '.join(sorted(SCENARIO_KEYS))}")
    roles_raw = d.get("role")
    if not isinstance(roles_raw, list) or not roles_raw:
        raise UserError(f"{where}: needs at least one [[role]]")
    roles = tuple(_role(r, where) for r in roles_raw)
    names = [r.name for r in roles]
    if len(set(names)) != len(names):
        raise UserError(f"{where}: role names must differ")
    for r in roles:
        if r.until and (r.until not in names or r.until == r.name):
            raise UserError(f"{where} role {r.name!r}: until={r.until!r} must name another role")
    modes = _families(d.get("modes", list(MODE_FAMILIES)), f"{where}: modes", empty=False)
    controls = _families(d.get("controls", ["direct"]), f"{where}: controls", empty=True)
    order = d.get("order")
    if order is not None and (not isinstance(order, int) or isinstance(order, bool) or order < 1):
        raise UserError(f"{where}: order must be a whole number from 1 (its place in 'all'), got {order!r}")
    desc = d.get("description", "")
    if not isinstance(desc, str) or not desc:
        raise UserError(f"{where}: needs a description")
    return Scenario(name=name, description=desc, origin=str(d.get("origin", "")), roles=roles, modes=modes,
                    order=order, controls=controls)


def _families(v: object, where: str, empty: bool) -> tuple[str, ...]:
    if not isinstance(v, list) or (not v and not empty) or not set(v) <= set(MODE_FAMILIES):
        raise UserError(f"{where} must list {'' if empty else 'some '}of {', '.join(MODE_FAMILIES)}, got {v!r}")
    return tuple(v)


def load_scenario(path: Path) -> Scenario:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise UserError(f"cannot read scenario {path}: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise UserError(f"scenario {path}: not UTF-8 text (byte {e.start}); scenarios are TOML files") from None
    return parse_scenario(path.stem, text, str(path))


def available(directory: Path = SCENARIO_DIR) -> dict[str, Path]:
    return {p.stem: p for p in sorted(directory.glob("*.toml"))}


def select(spec: str, directory: Path = SCENARIO_DIR) -> list[Scenario]:
    """``all`` or a comma-separated list of scenario names or TOML paths."""
    known = available(directory)
    if spec == "all":
        loaded = [load_scenario(p) for p in known.values()]
        return sorted(loaded, key=lambda s: (s.order is None, s.order or 0, s.name))
    out = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item.endswith(".toml"):
            out.append(load_scenario(Path(item)))
        elif item in known:
            out.append(load_scenario(known[item]))
        else:
            raise UserError(f"unknown scenario {item!r}; known: {', '.join(known) or '(none)'} (or a path to a .toml)")
    if not out:
        raise UserError("no scenarios selected")
    return out
