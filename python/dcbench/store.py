"""Where results go: ``results/<run-id>/`` files, and ``results/dcbench.sqlite``
as an index of them.

The run directories are the truth (``results.py`` reads them); the SQLite
file only makes queries across many runs quick (``dcbench history``), and
``Store.reindex`` rebuilds it from the directories on demand, so runs copied
in from elsewhere are found and a lost or stale index costs nothing.

Every file is written to a temporary name and renamed into place, so a
reader never sees half a file. A run's manifest says ``running`` until the
last case is stored, then ``complete``; a run stopped by a signal says
``incomplete``; one whose dcbench died without a word still says
``running`` with a pid that no longer exists, and readers treat every status
but ``complete`` as incomplete. The SQLite schema is in docs/results.md.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

from . import RESULTS_FORMAT
from .results import read_cases, read_json

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id      TEXT PRIMARY KEY,
    format      INTEGER NOT NULL,
    started     TEXT NOT NULL,      -- ISO 8601, UTC
    finished    TEXT,
    status      TEXT NOT NULL,      -- running | complete | incomplete | failed
    host        TEXT,
    kernel      TEXT,
    fs_type     TEXT,
    device      TEXT,
    memory      INTEGER,            -- bytes the page cache could use
    profile     TEXT,
    git_commit  TEXT,
    results_dir TEXT NOT NULL,
    manifest    TEXT NOT NULL       -- manifest.json as stored
);
CREATE TABLE IF NOT EXISTS cases (
    run_id      TEXT NOT NULL REFERENCES runs(run_id),
    scenario    TEXT NOT NULL,
    mode        TEXT NOT NULL,
    rep         INTEGER NOT NULL,   -- 0-based repetition
    status      TEXT NOT NULL,      -- ok | failed | interrupted
    started     TEXT NOT NULL,
    wall_s      REAL,
    message     TEXT,
    PRIMARY KEY (run_id, scenario, mode, rep)
);
CREATE TABLE IF NOT EXISTS metrics (
    run_id      TEXT NOT NULL,
    scenario    TEXT NOT NULL,
    mode        TEXT NOT NULL,
    rep         INTEGER NOT NULL,
    role        TEXT NOT NULL,      -- a scenario role, or '*' for system-wide figures
    metric      TEXT NOT NULL,      -- see docs/results.md
    value       REAL NOT NULL,
    PRIMARY KEY (run_id, scenario, mode, rep, role, metric)
);
CREATE INDEX IF NOT EXISTS metrics_by_name ON metrics(scenario, mode, metric);
"""


def write_atomic(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode() if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, indent=1, sort_keys=False) + "\n")


class Store:
    """The SQLite index of every run under one results root."""

    def __init__(self, root: Path):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(root / "dcbench.sqlite", timeout=30)
        self.db.executescript(SCHEMA)
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def put_run(self, manifest: dict, results_dir: Path) -> None:
        t = manifest.get("system", {}).get("target", {})
        self.db.execute(
            "INSERT OR REPLACE INTO runs VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                manifest["run_id"], RESULTS_FORMAT, manifest["started"], manifest.get("finished"),
                manifest["status"], manifest.get("system", {}).get("host"),
                manifest.get("system", {}).get("kernel"), t.get("fs_type"), t.get("device"),
                manifest.get("memory", {}).get("effective"), manifest.get("profile"),
                manifest.get("system", {}).get("git_commit"), str(results_dir), json.dumps(manifest),
            ),
        )
        self.db.commit()

    def put_case(self, run_id: str, scenario: str, mode: str, rep: int, status: str,
                 started: str, wall_s: float | None, message: str | None,
                 metrics: dict[str, dict[str, float]]) -> None:
        """One case and its metrics (``{role: {metric: value}}``), in one transaction."""
        with self.db:
            self.db.execute(
                "INSERT OR REPLACE INTO cases VALUES (?,?,?,?,?,?,?,?)",
                (run_id, scenario, mode, rep, status, started, wall_s, message),
            )
            self.db.executemany(
                "INSERT OR REPLACE INTO metrics VALUES (?,?,?,?,?,?,?)",
                [
                    (run_id, scenario, mode, rep, role, name, float(v))
                    for role, ms in metrics.items()
                    for name, v in ms.items()
                    if v is not None
                ],
            )

    def reindex(self) -> None:
        """Brings the index in step with the run directories under the root:
        a run copied in is added, a run whose manifest changed is read again,
        a run whose directory is gone is forgotten."""
        indexed = dict(self.db.execute("SELECT run_id, manifest FROM runs"))
        present = set()
        for path in sorted(self.root.glob("*/manifest.json")):
            manifest = read_json(path)
            run_id = manifest.get("run_id", path.parent.name)
            present.add(run_id)
            if indexed.get(run_id) == json.dumps(manifest):
                continue
            self._forget(run_id)
            self.put_run(manifest, path.parent)
            for c in read_cases(path.parent):
                self.put_case(run_id, c["scenario"], c["mode"], c["rep"], c["status"], c["started"],
                              c.get("wall_s"), c.get("message"), c.get("metrics") or {})
        for run_id in indexed.keys() - present:
            self._forget(run_id)

    def _forget(self, run_id: str) -> None:
        with self.db:
            for table in ("metrics", "cases", "runs"):
                self.db.execute(f"DELETE FROM {table} WHERE run_id = ?", (run_id,))
