"""Which ``RWF_DONTCACHE`` the kernel under test has, for the manifest.

The answer comes from ``dontcache probe`` on the run's target (behaviour:
how much of a large ``RWF_DONTCACHE`` write is still dirty when the call
returns), which falls back to the kernel's release number only where the
filesystem refuses the flag and says so. dcbench never shows a guess as a
fact: when the probe cannot run, the generation is recorded as unknown.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from . import spawn

LABELS = {
    "unsupported": "no RWF_DONTCACHE (before 6.14)",
    "inline-flush": "inline flush (6.14-7.1)",
    "flusher-kick": "flusher kick (7.2+)",
    "unclear": "unclear",
}


def find_dontcache(dcload: Path) -> Path | None:
    """The ``dontcache`` command built beside ``dcload``, else on PATH."""
    beside = dcload.parent / "dontcache"
    if beside.is_file():
        return beside
    found = shutil.which("dontcache")
    return Path(found) if found else None


def probe(dcload: Path, directory: Path, block_device: Path | None = None) -> dict:
    """``dontcache probe --json`` on ``directory``, or a record saying why there is no answer."""
    tool = find_dontcache(dcload)
    if tool is None:
        return {"generation": None, "source": "not probed",
                "evidence": "the dontcache command was not found beside dcload nor on PATH"}
    args = [str(tool), "probe", "--json", str(directory)]
    if block_device is not None:
        args[3:3] = ["--block-device", str(block_device)]
    try:
        out = spawn.run(args, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as e:
        return {"generation": None, "source": "not probed", "evidence": f"dontcache probe could not run: {e}"}
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        return {"generation": None, "source": "not probed",
                "evidence": lines[-1] if lines else f"dontcache probe exited {out.returncode}"}
    return json.loads(out.stdout)


def label(record: dict | None) -> str:
    """One line for summaries and reports: ``inline flush (6.14-7.1), from behaviour; block devices: no``."""
    if not record:
        return "not recorded"
    gen = record.get("generation")
    text = f"{LABELS.get(gen, gen)}, from {record.get('source')}" if gen else f"unknown ({record.get('evidence')})"
    block = (record.get("block_devices") or {}).get("supported")
    if block is not None:
        text += f"; block devices: {'yes (7.3+)' if block else 'no'}"
    return text
