"""Modes of one run against a reference mode, paired by repetition, on synthetic cases with known answers."""

from dcbench.against import against as against_by_rep
from dcbench.against import render_commit, verdict
from dcbench.compare import CONDITIONS_DIFFER
from dcbench.compare import verdict as unpaired_verdict
from dcbench.results import samples_by_rep
from dcbench.summary import render_markdown as summary_md
from dcbench.summary import summarize


def against(cases, manifest, reference, metrics=None):
    return against_by_rep(samples_by_rep(cases), manifest, reference, metrics)


def case(scenario, mode, rep, status="ok", **roles):
    return {"scenario": scenario, "mode": mode, "rep": rep, "status": status, "metrics": roles}


MANIFEST = {"run_id": "X", "status": "complete", "scenarios": ["seq-write", "small-files"],
            "modes": ["buffered", "dontcache", "writebehind:flusher"]}


def drifting(scenario="seq-write", role="writer", metric="mb_s", gain=1.05):
    """The reference's figure doubles and more across repetitions (a disk whose speed drifts); the
    mode is ``gain`` times it in every repetition."""
    cases = []
    for rep, speed in enumerate((100, 220, 150, 400, 310)):
        cases.append(case(scenario, "dontcache", rep, **{role: {metric: speed}, "*": {"peak_dirty": 1.0}}))
        cases.append(case(scenario, "writebehind:flusher", rep, **{role: {metric: speed * gain}}))
    return cases


def test_pairing_by_repetition_sees_through_drift_that_hides_a_difference_between_medians():
    rows = against(drifting(), MANIFEST, "dontcache")
    assert [(r.mode, r.role, r.metric) for r in rows] == [("writebehind:flusher", "writer", "mb_s")]
    r = rows[0]
    assert len(r.ratios) == 5 and abs(r.median - 1.05) < 1e-9
    assert r.verdict == "better"
    ref = [100, 220, 150, 400, 310]
    assert unpaired_verdict(ref, [v * 1.05 for v in ref], True) == "noise", "unpaired, the drift hides it"
    assert against(drifting(gain=0.9), MANIFEST, "dontcache")[0].verdict == "worse"


def test_verdicts_need_three_pairs_and_a_ratio_away_from_one():
    assert verdict([1.1, 1.2], True) == "n<3"
    assert verdict([1.0, 1.0, 1.0], True) == "noise"
    assert verdict([0.8, 1.3, 1.05, 0.9], True) == "noise"
    assert verdict([1.10, 1.12, 1.09, 1.11], True) == "better"
    assert verdict([1.10, 1.12, 1.09, 1.11], False) == "worse", "more latency is worse"


def test_only_repetitions_both_modes_finished_are_paired():
    cases = drifting()
    cases[4]["status"] = "failed"  # the reference's third repetition
    rows = against(cases, MANIFEST, "dontcache")
    assert len(rows[0].ratios) == 4


def test_each_role_gets_its_primary_figure_unless_figures_are_named():
    cases = []
    for rep in range(3):
        for mode, files in (("dontcache", 1000.0), ("writebehind:flusher", 1500.0)):
            cases.append(case("small-files", mode, rep,
                              creators={"files_s": files, "mb_s": files * 0.004, "lat_p99_us": 2000 / files}))
    rows = against(cases, MANIFEST, "dontcache")
    assert [(r.metric, round(r.median, 3)) for r in rows] == [("files_s", 1.5)], "files/s, not MB/s too"
    rows = against(cases, MANIFEST, "dontcache", ("lat_p99_us", "mb_s"))
    assert [(r.metric, r.verdict) for r in rows] == [("lat_p99_us", "better"), ("mb_s", "better")]


def test_a_role_run_at_another_engine_or_depth_is_not_judged():
    manifest = dict(MANIFEST, io={"seq-write": {"dontcache": {"writer": "io_uring QD16"},
                                                "writebehind:flusher": {"writer": "pvsync2 QD1"}}})
    assert against(drifting(), manifest, "dontcache")[0].verdict == CONDITIONS_DIFFER


def test_the_summary_sets_the_modes_against_the_kernels_mode_else_buffered():
    cases = drifting()
    md = summary_md(MANIFEST, summarize(cases), cases)
    assert "## Against dontcache, paired by repetition" in md
    assert "| seq-write | writer | writebehind:flusher | MB/s | 1.05x | 1.05x-1.05x | 5 | better |" in md
    for c in cases:
        c["mode"] = {"dontcache": "buffered"}.get(c["mode"], c["mode"])
    manifest = dict(MANIFEST, modes=["buffered", "writebehind:flusher"])
    assert "## Against buffered, paired by repetition" in summary_md(manifest, summarize(cases), cases)
    one = [c for c in cases if c["mode"] == "buffered"]
    assert "paired" not in summary_md(dict(MANIFEST, modes=["buffered"]), summarize(one), one)


def test_the_commit_text_keeps_within_72_columns_and_says_each_figure():
    manifest = dict(MANIFEST, scenarios=["competing-writers"])
    cases = drifting(scenario="competing-writers", role="buffered_writer")
    text = render_commit(against(cases, manifest, "dontcache"), "dontcache")
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 72
    assert lines[0] == "Against dontcache, paired by repetition (median, range, pairs):"
    assert lines[1].startswith("  competing-writers buffered_writer writebehind:flusher MB/s: 1.05x")
    assert lines[2].startswith("      ") and lines[2].strip().endswith("better"), "a long line goes on indented"
