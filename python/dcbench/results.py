"""Reading stored runs back from their directories.

A run directory is the whole truth about a run: ``manifest.json`` and one
``case.json`` per case (status, wall time, figures). Nothing here reads the
SQLite index, so a run directory copied to another machine compares, reports
and summarizes as it did where it ran.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from . import RESULTS_FORMAT
from .errors import UserError

Key = tuple[str, str, str, str]  # scenario, mode, role, metric


@dataclass
class Run:
    run_id: str
    directory: Path
    manifest: dict
    # (scenario, mode, role, metric) -> one value per good repetition, in repetition order
    samples: dict[Key, list[float]] = field(default_factory=dict)
    # The same values by repetition number, for pairing modes of one repetition.
    by_rep: dict[Key, dict[int, float]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"

    def cases(self) -> set[tuple[str, str]]:
        return {(k[0], k[1]) for k in self.samples}


def _check_format(what: str, obj: dict) -> None:
    if obj.get("format", 1) > RESULTS_FORMAT:
        raise UserError(f"{what} has results format {obj['format']}; this dcbench reads up to "
                        f"{RESULTS_FORMAT}: update dcbench")


def read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{path} cannot be read: {e}") from None


def read_cases(directory: Path) -> list[dict]:
    """Every stored case of a run directory (``case.json``), in the order they ran."""
    cases = []
    for path in directory.glob("cases/*/*/rep*/case.json"):
        case = read_json(path)
        _check_format(str(path), case)
        cases.append(case)
    # "seq" counts the cases in the order the run took them; "started" has
    # only a second's resolution and ties in short cases.
    cases.sort(key=lambda c: (c.get("seq", 1 << 30), c.get("started", ""), c.get("rep", 0)))
    return cases


def samples_by_rep(cases: list[dict]) -> dict[Key, dict[int, float]]:
    """{(scenario, mode, role, metric): {repetition: value}} over the good cases."""
    samples: dict[Key, dict[int, float]] = {}
    for case in cases:
        if case.get("status") != "ok":
            continue
        for role, metrics in (case.get("metrics") or {}).items():
            for metric, value in metrics.items():
                if value is not None:
                    samples.setdefault((case["scenario"], case["mode"], role, metric), {})[case["rep"]] = float(value)
    return samples


def in_rep_order(by_rep: dict[Key, dict[int, float]]) -> dict[Key, list[float]]:
    """Each figure's values as a list, in repetition order."""
    return {k: [v[r] for r in sorted(v)] for k, v in by_rep.items()}


def samples_of(cases: list[dict]) -> dict[Key, list[float]]:
    """{(scenario, mode, role, metric): values} over the good cases, in repetition order."""
    return in_rep_order(samples_by_rep(cases))


def case_order(cases: list[dict]) -> list[tuple[str, str]]:
    """(scenario, mode) pairs grouped by scenario, scenarios and modes in the order they first ran."""
    seen: list[tuple[str, str]] = []
    for c in cases:
        if (c["scenario"], c["mode"]) not in seen:
            seen.append((c["scenario"], c["mode"]))
    scenarios = list(dict.fromkeys(s for s, _ in seen))
    return sorted(seen, key=lambda k: scenarios.index(k[0]))


def run_directory(spec: str, root: Path) -> Path:
    """A run's directory from its id (under ``root``) or its path."""
    path = Path(spec)
    if path.is_dir() and (path / "manifest.json").exists():
        return path
    directory = root / spec
    if not (directory / "manifest.json").exists():
        known = sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.is_dir() else []
        hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
        raise UserError(f"unknown run {spec!r}: no {directory}/manifest.json{hint}")
    return directory


def load(spec: str, root: Path) -> Run:
    """A run by id (``20261121-071500-ab12``) or by its directory."""
    directory = run_directory(spec, root)
    manifest = read_json(directory / "manifest.json")
    _check_format(f"run {directory.name}", manifest)
    run = Run(manifest.get("run_id", directory.name), directory, manifest)
    run.by_rep = samples_by_rep(read_cases(directory))
    run.samples = in_rep_order(run.by_rep)
    return run
