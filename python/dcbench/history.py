"""``dcbench history``: one figure across every stored run, oldest first.

So a regression across kernels is one command: every run under the results
root (through the SQLite index, brought up to date with the run directories
first) that has the scenario, mode, role and metric asked for, with its date, host,
kernel and the median over its repetitions.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from .errors import UserError
from .store import Store


def query(root: Path, scenario: str | None, mode: str | None, metric: str, role: str | None,
          include_incomplete: bool = False) -> list[dict]:
    if not any(root.glob("*/manifest.json")):
        raise UserError(f"no runs under {root}; run `dcbench run` first or pass --results")
    store = Store(root)
    store.reindex()
    db = store.db
    try:
        known = {m for (m,) in db.execute("SELECT DISTINCT metric FROM metrics")}
        if known and metric not in known:
            raise UserError(f"unknown metric {metric!r}; stored metrics: {', '.join(sorted(known))}")
        sql = """SELECT r.run_id, r.started, r.host, r.kernel, r.status, m.scenario, m.mode, m.role, m.value
                 FROM metrics m JOIN runs r USING (run_id)
                 JOIN cases c USING (run_id, scenario, mode, rep)
                 WHERE m.metric = ? AND c.status = 'ok'"""
        args: list[object] = [metric]
        for col, val in (("m.scenario", scenario), ("m.mode", mode), ("m.role", role)):
            if val:
                sql += f" AND {col} = ?"
                args.append(val)
        if not include_incomplete:
            sql += " AND r.status = 'complete'"
        sql += " ORDER BY r.started, m.scenario, m.mode, m.role"
        groups: dict[tuple, dict] = {}
        for run_id, started, host, kernel, status, s, m, ro, value in db.execute(sql, args):
            g = groups.setdefault((run_id, s, m, ro), {"run_id": run_id, "started": started, "host": host,
                                                          "kernel": kernel, "status": status, "scenario": s,
                                                          "mode": m, "role": ro, "values": []})
            g["values"].append(value)
    finally:
        db.close()
    rows = list(groups.values())
    for g in rows:
        g["median"] = statistics.median(g["values"])
        g["n"] = len(g["values"])
    return rows


def plot(rows: list[dict], metric: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 3.5))
    series: dict[str, list[dict]] = {}
    for r in rows:
        series.setdefault(f"{r['scenario']} {r['mode']} {r['role']}", []).append(r)
    runs = sorted({(r["started"], r["run_id"], r["kernel"]) for r in rows})
    x_of = {run_id: i for i, (_, run_id, _) in enumerate(runs)}
    for name, rs in series.items():
        ax.plot([x_of[r["run_id"]] for r in rs], [r["median"] for r in rs], "o-", label=name)
    ax.set_xticks(range(len(runs)), [f"{s[:10]}\n{k}" for s, _, k in runs], fontsize=7)
    ax.set(ylabel=metric, title=f"{metric} across runs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.savefig(out, bbox_inches="tight")
    plt.close(fig)


def to_json(rows: list[dict]) -> str:
    return json.dumps(rows, indent=1)
