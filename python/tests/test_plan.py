"""The plan dcbench makes: the order of its cases, and the dcload command lines it builds for each."""

import dataclasses
from pathlib import Path

from dcbench.modes import Mode, parse_modes
from dcbench.profiles import PROFILES
from dcbench.runner import Case, RunConfig, dcload_args, plan_cases, precreate_args
from dcbench.scenario import select
from dcbench.summary import render_markdown
from dcbench.errors import UserError

import pytest

G = 1 << 30


def cfg(profile="quick", **kw):
    base = dict(scenarios=select("all"), modes=parse_modes("all"), repeat=1, profile=PROFILES[profile],
                memory=G, balloon=False, size_override=None, target=Path("/t"), results=Path("/r"),
                dcload=Path("/bin/dcload"))
    base.update(kw)
    return RunConfig(**base)


def args_of(scenario, mode, **kw):
    (s,) = select(scenario)
    a, notes = dcload_args(Case(s, Mode(mode), 0), cfg(**kw), Path("/t/f"), Path("/r/out.json"))
    return a, notes


def job_sections(a):
    """Split a command line into its --name sections."""
    out, cur = [], None
    for x in a:
        if x.startswith("--name="):
            cur = [x]
            out.append(cur)
        elif cur is not None:
            cur.append(x)
    return out


def test_noisy_neighbor_is_one_invocation_readers_stop_with_the_writer():
    a, _ = args_of("noisy-neighbor", "dontcache")
    writer, readers = job_sections(a)
    assert "--exitall=1" in writer and "--exit_what=stonewall" in writer and "--uncached=1" in writer
    assert "--new_group" in readers and "--time_based" in readers and "--numjobs=3" in readers
    assert "--uncached=1" in readers, "readers are in the mode under test"
    assert "--size=256m" in readers and "--size=2048m" in writer
    assert "--runtime=4s" in writer, "quick caps the writer; exitall then stops the readers"


def test_mixed_readers_stay_buffered():
    a, _ = args_of("noisy-neighbor-mixed", "direct")
    writer, readers = job_sections(a)
    assert "--direct=1" in writer
    assert not any(x.startswith(("--direct=", "--uncached=", "--writebehind=")) for x in readers)


def test_writebehind_runs_at_the_scenarios_engine_and_depth():
    for scenario in ("seq-write", "rand-write"):
        a, notes = args_of(scenario, "writebehind:lazy")
        b, _ = args_of(scenario, "buffered")
        (w,) = job_sections(a)
        (plain,) = job_sections(b)
        assert "--writebehind=lazy" in w
        engine = [x for x in w if x.startswith(("--ioengine=", "--iodepth="))]
        assert engine == [x for x in plain if x.startswith(("--ioengine=", "--iodepth="))], scenario
        assert notes == [], "nothing about the job changes but the mode"


def test_full_profile_follows_the_seed():
    a, _ = args_of("axboe-write", "buffered", profile="full", memory=4 * G)
    (w,) = job_sections(a)
    assert "--numjobs=32" in w and "--bs=64k" in w and "--runtime=300s" in w and "--time_based" in w
    assert "--size=256m" in w, "2 x memory over 32 files"
    a, _ = args_of("seq-write", "buffered", profile="full", memory=4 * G)
    assert not any(x.startswith("--runtime") for x in a), "no cap in the full profile"


def test_small_files_are_new_files_per_job():
    a, _ = args_of("small-files", "writebehind:flusher", size_override=64 << 20)
    (w,) = job_sections(a)
    assert "--nrfiles=10000" in w and "--filesize=4096" in w, "--size leaves the 4k rule alone"
    assert "--filename_format=creators.$jobnum.$filenum" in w
    assert not any(x.startswith("--size=") for x in w)


def test_size_override_applies_to_memory_rules_only():
    a, _ = args_of("multi-write", "buffered", size_override=64 << 20)
    (w,) = job_sections(a)
    assert "--size=64m" in w and "--numjobs=4" in w


def test_precreate_is_direct_so_nothing_stays_cached():
    (s,) = select("seq-read")
    pre = precreate_args(Case(s, Mode("buffered"), 0), cfg(), Path("/t/f"))
    assert "--direct=1" in pre and "--size=2048m" in pre
    (w,) = select("seq-write")
    assert precreate_args(Case(w, Mode("buffered"), 0), cfg(), Path("/t/f")) is None


def test_modes_parse():
    assert [m.name for m in parse_modes("buffered,writebehind")] == [
        "buffered", "writebehind:flusher", "writebehind:lazy", "writebehind:inline",
        "writebehind:per-file", "writebehind:kernel"]
    with pytest.raises(UserError, match="unknown mode 'cached'"):
        parse_modes("cached")


def test_progress_bar_renders_on_a_terminal():
    import io

    from rich.console import Console

    from dcbench.cli import _Progress

    out = io.StringIO()
    bar = _Progress(Console(file=out, force_terminal=True, width=120), total=10.0)
    bar.start_case("seq-write dontcache #1")
    bar.advance(5.0)
    bar.close()
    text = out.getvalue()
    assert "seq-write dontcache #1" in text and "50%" in text and "ETA" in text


def test_a_profile_s_job_options_hold_for_every_role_in_every_mode():
    c = cfg("engine-policies", scenarios=select("seq-write,axboe-write"))
    for s in c.scenarios:
        for mode in ("buffered", "dontcache", "direct", "writebehind:flusher", "writebehind:lazy"):
            a, _ = dcload_args(Case(s, Mode(mode), 0), c, Path("/t/f"), Path("/r/out.json"))
            for section in job_sections(a):
                assert "--ioengine=pvsync2" in section, (s.name, mode, section)
                assert "--ioengine=io_uring" not in section
    # The scenario files themselves are untouched: quick runs them at io_uring.
    a, _ = args_of("seq-write", "writebehind:flusher")
    assert "--ioengine=io_uring" in job_sections(a)[0]


def test_each_repetition_rotates_the_modes_so_none_always_follows_another():
    modes = parse_modes("buffered,dontcache,writebehind:flusher")
    seq, rand = select("seq-write,rand-read")
    rand = dataclasses.replace(rand, modes=("buffered", "writebehind"))  # a scenario with fewer modes
    order = {}
    for case in plan_cases(cfg(scenarios=[seq, rand], modes=modes, repeat=4), modes):
        order.setdefault((case.scenario.name, case.rep), []).append(case.mode.name)
    flusher = "writebehind:flusher"
    assert order["seq-write", 0] == ["buffered", "dontcache", flusher]
    assert order["seq-write", 1] == ["dontcache", flusher, "buffered"]
    assert order["seq-write", 2] == [flusher, "buffered", "dontcache"]
    assert order["seq-write", 3] == order["seq-write", 0]
    # A scenario rotates the modes it has.
    assert [order["rand-read", r] for r in range(4)] == [["buffered", flusher], [flusher, "buffered"]] * 2


def test_the_summary_says_how_the_modes_were_ordered():
    def header(**manifest):
        return next(x for x in render_markdown(manifest, []).splitlines() if "repetition(s)" in x)

    assert "one place further along" in header(repeat=5, mode_order="rotated")
    assert "further" not in header(repeat=5)  # a run from before the order was recorded
    assert "further" not in header(repeat=1, mode_order="rotated")
