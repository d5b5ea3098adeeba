"""Scenario files validate, and mistakes in them are refused with a clear message."""

import pytest

from dcbench.errors import UserError
from dcbench.scenario import DEFAULT_ORDER, available, parse_scenario, select


def test_every_scenario_file_validates():
    names = [s.name for s in select("all")]
    assert names[: len(DEFAULT_ORDER)] == list(DEFAULT_ORDER), "the seed's whole matrix, in order"
    assert set(available()) >= set(DEFAULT_ORDER)


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
    ],
)
def test_bad_scenarios_are_refused(text, message):
    with pytest.raises(UserError, match=message):
        parse_scenario("bad", text)


def test_unknown_scenario_name():
    with pytest.raises(UserError, match="unknown scenario 'nope'"):
        select("seq-write,nope")
