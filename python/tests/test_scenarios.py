"""Scenario files validate, and mistakes in them are refused with a clear message."""

import pytest

from dcbench.errors import UserError
from dcbench.scenario import available, parse_scenario, select

# The seed's matrix, in the order it runs.
SEED_ORDER = [
    "seq-write", "rand-write", "seq-read", "rand-read", "multi-write", "noisy-neighbor",
    "noisy-neighbor-mixed", "competing-writers", "axboe-write", "small-files",
]


def test_every_scenario_file_validates_and_all_runs_in_their_order():
    scenarios = select("all")
    assert [s.name for s in scenarios][: len(SEED_ORDER)] == SEED_ORDER, "the seed's whole matrix, in order"
    assert set(available()) >= set(SEED_ORDER)
    controls = {s.name: s.controls for s in scenarios}
    assert controls["seq-read"] == controls["rand-read"] == ("buffered", "direct")
    assert controls["seq-write"] == ("direct",)


def test_unnumbered_scenarios_come_last_by_name(tmp_path):
    for name, order in (("zz", None), ("aa", None), ("mid", 2), ("first", 1)):
        (tmp_path / f"{name}.toml").write_text(("" if order is None else f"order = {order}\n") + GOOD)
    assert [s.name for s in select("all", tmp_path)] == ["first", "mid", "aa", "zz"]


def test_noisy_neighbor_shape():
    (nn,) = select("noisy-neighbor")
    writer, readers = nn.roles
    assert (writer.count, readers.count) == (1, 3)
    assert readers.precreate and readers.until == "writer" and readers.mode == "test"
    (mixed,) = select("noisy-neighbor-mixed")
    assert mixed.roles[1].mode == "buffered"


GOOD = """
description = "d"
[[role]]
name = "w"
size = "2*mem"
[role.job]
rw = "write"
bs = "1M"
"""


@pytest.mark.parametrize(
    "text, message",
    [
        ("description = 'd'", "needs at least one"),
        ("colour = 1\n" + GOOD, "unknown key"),
        (GOOD.replace('size = "2*mem"', 'size = "2*ram"'), "size"),
        (GOOD.replace('bs = "1M"', 'bs = "1M"\nfilename = "/etc/passwd"'), "dcbench controls"),
        (GOOD.replace('name = "w"', 'name = "w"\nuntil = "nobody"'), "must name another role"),
        (GOOD.replace('name = "w"', 'name = "w"\nmode = "direct"'), "mode must be"),
        (GOOD.replace('name = "w"', 'name = "w"\ncount = 0'), "count"),
        (GOOD.replace('rw = "write"', ""), "rw="),
        ("[[role]\n", "not valid TOML"),
        ("order = 0\n" + GOOD, "order must be a whole number"),
        ("controls = ['fast']\n" + GOOD, "controls must list of buffered"),
        ("modes = []\n" + GOOD, "modes must list some of"),
    ],
)
def test_bad_scenarios_are_refused(text, message):
    with pytest.raises(UserError, match=message):
        parse_scenario("bad", text)


def test_unknown_scenario_name():
    with pytest.raises(UserError, match="unknown scenario 'nope'"):
        select("seq-write,nope")
