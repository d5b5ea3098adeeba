"""Reading stored runs back: by run id (from the SQLite store) or by directory."""

from __future__ import annotations

import json
import sqlite3
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
    # (scenario, mode, role, metric) -> one value per good repetition
    samples: dict[Key, list[float]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return self.manifest.get("status") == "complete"

    def cases(self) -> set[tuple[str, str]]:
        return {(k[0], k[1]) for k in self.samples}


def _connect(root: Path) -> sqlite3.Connection:
    db = root / "dcbench.sqlite"
    if not db.exists():
        raise UserError(f"no results database at {db}; run `dcbench run` first or pass --results")
    return sqlite3.connect(db)


def load(spec: str, root: Path) -> Run:
    """A run by id (``20261121-071500-ab12``) or by its directory."""
    path = Path(spec)
    if path.is_dir() and (path / "manifest.json").exists():
        directory = path
        root = path.parent
    else:
        directory = root / spec
        if not (directory / "manifest.json").exists():
            known = sorted(p.parent.name for p in root.glob("*/manifest.json")) if root.is_dir() else []
            hint = f"; known runs: {', '.join(known[-5:])}" if known else ""
            raise UserError(f"unknown run {spec!r}: no {directory}/manifest.json{hint}")
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
    except (OSError, json.JSONDecodeError) as e:
        raise UserError(f"{directory}/manifest.json cannot be read: {e}") from None
    if manifest.get("format", 0) > RESULTS_FORMAT:
        raise UserError(f"run {directory.name} has results format {manifest['format']}; this dcbench reads up to "
                        f"{RESULTS_FORMAT}: update dcbench")
    run = Run(manifest.get("run_id", directory.name), directory, manifest)
    db = _connect(root)
    try:
        rows = db.execute(
            """SELECT m.scenario, m.mode, m.role, m.metric, m.value FROM metrics m
               JOIN cases c USING (run_id, scenario, mode, rep)
               WHERE m.run_id = ? AND c.status = 'ok' ORDER BY m.rep""",
            (run.run_id,),
        ).fetchall()
    finally:
        db.close()
    for scenario, mode, role, metric, value in rows:
        run.samples.setdefault((scenario, mode, role, metric), []).append(value)
    return run
