"""Verdicts on synthetic results with known answers, and the commit format."""

from pathlib import Path

from dcbench.compare import COMMIT_WIDTH, compare, render_commit, render_markdown, verdict
from dcbench.results import Run
from dcbench.system import open_files


def test_identical_samples_are_noise():
    assert verdict([100, 101, 99], [100, 101, 99], True) == "noise"
    assert verdict([5, 5, 5], [5, 5, 5], True) == "noise"


def test_well_separated_samples_get_a_direction():
    a, b = [100, 101, 99, 100], [150, 151, 149, 150]
    assert verdict(a, b, higher_is_better=True) == "better"  # more MB/s
    assert verdict(a, b, higher_is_better=False) == "worse"  # more latency
    assert verdict(b, a, higher_is_better=False) == "better"


def test_overlapping_samples_are_noise():
    assert verdict([100, 120, 80], [105, 125, 85], True) == "noise"


def test_too_few_repetitions():
    assert verdict([1, 2], [3, 4, 5], True) == "n<3"
    assert verdict([1, 2, 3], [9], True) == "n<3"


def run(run_id, samples, status="complete", kernel="6.18.0", modes=("buffered", "direct")):
    manifest = {"run_id": run_id, "status": status, "scenarios": ["seq-write", "seq-read"], "modes": list(modes),
                "system": {"kernel": kernel, "target": {"fs_type": "ext4"}, "vm": {"dirty_ratio": "20"}},
                "memory": {"effective": 1 << 30}}
    return Run(run_id, Path("/nonexistent"), manifest, samples)


def test_control_cases_and_manifest_differences_come_first():
    a = run("A", {("seq-write", "direct", "writer", "mb_s"): [1000, 1010, 990],
                  ("seq-write", "buffered", "writer", "mb_s"): [300, 310, 290]})
    b = run("B", {("seq-write", "direct", "writer", "mb_s"): [880, 890, 870],
                  ("seq-write", "buffered", "writer", "mb_s"): [600, 610, 590]}, kernel="7.2.0")
    c = compare(a, b)
    md = render_markdown(c)
    assert "system.kernel: 6.18.0 -> 7.2.0" in md
    assert "conditions differ between A and B: direct seq-write writer MB/s -12.0%, significant" in md
    assert "2 of 2 figures beyond noise" in md
    assert "| buffered writer MB/s | 300 | 600 | +100.0% | better |" in md


def test_control_cases_are_what_the_run_recorded_else_the_scenario_file():
    samples_a = {("seq-read", "buffered", "reader", "mb_s"): [1000, 1010, 990],
                 ("seq-write", "buffered", "writer", "mb_s"): [300, 310, 290]}
    samples_b = {k: [v * 2 for v in vs] for k, vs in samples_a.items()}
    # No controls recorded: scenarios/seq-read.toml makes buffered a control there.
    c = compare(run("A", samples_a), run("B", samples_b))
    assert [(r.scenario, r.mode) for r in c.control_alarms] == [("seq-read", "buffered")]
    # Recorded: the run's own list wins, whatever the file says today.
    a, b = run("A", samples_a), run("B", samples_b)
    a.manifest["controls"] = {"seq-read": ["direct"], "seq-write": ["buffered"]}
    assert [(r.scenario, r.mode) for r in compare(a, b).control_alarms] == [("seq-write", "buffered")]


def test_mismatched_scenarios_compare_the_intersection_and_incomplete_runs_warn():
    a = run("A", {("seq-write", "buffered", "writer", "mb_s"): [1, 2, 3],
                  ("seq-read", "buffered", "reader", "mb_s"): [1, 2, 3]})
    b = run("B", {("seq-write", "buffered", "writer", "mb_s"): [1, 2, 3]}, status="incomplete")
    c = compare(a, b)
    assert [(r.scenario, r.verdict) for r in c.rows] == [("seq-write", "noise")]
    assert c.only_a == [("seq-read", "buffered")]
    assert any("incomplete" in w for w in c.warnings)


def test_commit_format_never_exceeds_72_columns():
    long_mode = "writebehind:per-file"
    samples_a = {("competing-writers", long_mode, "buffered_writer", m): [123456.7, 123000.1, 124000.9]
                 for m in ("mb_s", "lat_p999_us", "lat_p50_us")}
    samples_a[("competing-writers", long_mode, "*", "peak_cached")] = [9.9e9, 9.8e9, 9.7e9]
    samples_b = {k: [v * 1.5 for v in vs] for k, vs in samples_a.items()}
    a, b = run("20261121-071500-ab12", samples_a), run("20261122-071500-cd34", samples_b, kernel="7.2.0-rc1-long")
    text = render_commit(compare(a, b))
    assert "Before" in text and "After" in text and "Change" in text
    for line in text.splitlines():
        assert len(line) <= COMMIT_WIDTH, f"{len(line)}: {line!r}"
    assert "+50.0%" in text
    assert "writebehind:per-file buffered_writer p99.9 lat us" in text, "long labels are wrapped, not cut"


def test_figures_at_another_engine_or_depth_are_not_compared():
    samples_a = {("rand-write", "writebehind:flusher", "writer", "mb_s"): [40, 41, 39],
                 ("rand-write", "buffered", "writer", "mb_s"): [400, 410, 390]}
    samples_b = {("rand-write", "writebehind:flusher", "writer", "mb_s"): [160, 161, 159],
                 ("rand-write", "buffered", "writer", "mb_s"): [400, 410, 390]}
    a, b = run("A", samples_a), run("B", samples_b)
    a.manifest["io"] = {"rand-write": {"writebehind:flusher": {"writer": "pvsync2 QD1"},
                                       "buffered": {"writer": "io_uring QD16"}}}
    b.manifest["io"] = {"rand-write": {"writebehind:flusher": {"writer": "io_uring QD16"},
                                       "buffered": {"writer": "io_uring QD16"}}}
    c = compare(a, b)
    verdicts = {r.mode: r.verdict for r in c.rows}
    assert verdicts == {"writebehind:flusher": "conditions differ", "buffered": "noise"}
    md = render_markdown(c)
    assert "conditions differ for rand-write writebehind:flusher: engine and depth pvsync2 QD1 -> io_uring QD16" in md
    assert "0 of 1 figures beyond noise" in md, "a figure not compared is not counted as decided"
    for line in render_commit(c).splitlines():
        assert len(line) <= COMMIT_WIDTH
    # Runs that did not record engine and depth are compared as before.
    del a.manifest["io"]
    assert {r.verdict for r in compare(a, b).rows} == {"better", "noise"}


def test_summary_marks_modes_at_another_engine_or_depth():
    from dcbench.modes import Mode, io_conditions
    from dcbench.summary import attach_io, io_note, render_markdown as summary_md

    assert io_conditions({"ioengine": "io_uring", "iodepth": 16}) == "io_uring QD16"
    assert io_conditions({"ioengine": "pvsync2", "iodepth": 16}) == "pvsync2 QD1", "sync engines keep one in flight"
    job, notes = Mode("dontcache").options({"rw": "write"})
    assert io_conditions(job) == "pvsync2 QD1" and notes
    manifest = {"run_id": "X", "status": "complete",
                "io": {"seq-write": {"buffered": {"writer": "psync QD1"}, "dontcache": {"writer": "pvsync2 QD1"}},
                       "rand-read": {"buffered": {"reader": "io_uring QD16"}, "direct": {"reader": "io_uring QD16"}}}}
    rows = attach_io([{"scenario": "seq-write", "mode": "buffered", "role": "writer", "n": 5, "mb_s": 1.0},
                      {"scenario": "seq-write", "mode": "dontcache", "role": "writer", "n": 5, "mb_s": 1.0},
                      {"scenario": "rand-read", "mode": "direct", "role": "reader", "n": 5, "mb_s": 1.0}], manifest)
    md = summary_md(manifest, rows)
    assert "| dontcache [pvsync2 QD1] | writer |" in md and "| buffered [psync QD1] | writer |" in md
    assert "| direct | reader |" in md, "equal conditions are not marked"
    assert "different engines or depths in seq-write" in io_note(rows)


def test_summary_names_scenarios_whose_cases_ran_short():
    from dcbench.summary import render_markdown as summary_md
    from dcbench.summary import summarize_samples

    samples = {("multi-write", "dontcache", "writers", "runtime_s"): [0.5, 0.6, 0.7],
               ("multi-write", "writebehind:flusher", "writers", "runtime_s"): [0.6, 0.8, 0.9],
               ("rand-write", "dontcache", "writer", "runtime_s"): [4.0, 4.1, 4.0]}
    rows = summarize_samples(samples)
    md = summary_md({"run_id": "X", "status": "complete"}, rows)
    assert "cases ran shorter than 2 s (multi-write 0.6-0.8 s, medians per mode)" in md
    assert "rand-write" not in md.split("##")[0], "a case of 4 s is not short"
    assert "shorter than" not in summary_md({"run_id": "X", "status": "complete"}, rows[2:])


def test_summary_names_the_cases_during_which_the_host_took_cpu_time():
    from dcbench.metrics import steal_note

    samples = {("seq-write", "buffered", "*", "cpu_steal_pct"): [0.5, 31.0, 1.0],
               ("seq-write", "dontcache", "*", "cpu_steal_pct"): [0.0, 4.9, 0.2],
               ("seq-write", "dontcache", "writer", "mb_s"): [900.0, 300.0, 880.0]}
    note = steal_note(samples)
    assert note is not None and "seq-write buffered 31%" in note
    assert "dontcache" not in note, "4.9% is under the threshold"
    assert steal_note({k: v for k, v in samples.items() if k[1] != "buffered"}) is None
    quiet = {k: v for k, v in samples.items() if k[1] != "buffered"}
    c = compare(run("A", quiet), run("B", samples))
    assert any(w.startswith("run B: the hypervisor took") for w in c.warnings)
    assert not any(w.startswith("run A") for w in c.warnings)


def test_runs_on_kernels_with_different_dontcache_generations_are_warned_about():
    samples = {("seq-write", "buffered", "writer", "mb_s"): [1, 2, 3]}
    a, b, old = run("A", samples), run("B", samples, kernel="7.2.0"), run("O", samples)
    a.manifest["kernel_dontcache"] = {"generation": "inline-flush", "source": "behaviour",
                                      "block_devices": {"supported": False}}
    b.manifest["kernel_dontcache"] = {"generation": "flusher-kick", "source": "behaviour",
                                      "block_devices": {"supported": False}}
    md = render_markdown(compare(a, b))
    assert ("warning: the kernels' RWF_DONTCACHE differ: A inline flush (6.14-7.1), from behaviour; "
            "block devices: no; B flusher kick (7.2+), from behaviour; block devices: no") in md
    assert "kernel_dontcache.generation: inline-flush -> flusher-kick" in md
    # A run from before the probe existed: listed as a manifest difference, not guessed at.
    c = compare(a, old)
    assert not any("RWF_DONTCACHE differ" in w for w in c.warnings)
    assert "kernel_dontcache.generation: inline-flush -> None" in c.manifest_diffs


def test_runs_under_different_descriptor_limits_list_them_as_manifest_differences():
    """Write-behind holds closed files up to a share of dcload's descriptor
    limit, so small files run faster under a higher one: a comparison says
    where the limits differ."""
    samples = {("small-files", "writebehind:flusher", "creators", "files_s"): [1, 2, 3]}
    a, b = run("A", samples), run("B", samples)
    a.manifest["system"]["open_files"] = {"soft": 1024, "hard": 524288}
    b.manifest["system"]["open_files"] = {"soft": 1024, "hard": 4096}
    assert "system.open_files.hard: 524288 -> 4096" in compare(a, b).manifest_diffs
    here = open_files()
    assert 0 < here["soft"] <= here["hard"], here
