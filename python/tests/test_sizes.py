import pytest

from dcbench.sizes import evaluate_rule, format_size, parse_size

G, M = 1 << 30, 1 << 20


def test_parse_size_reads_sizes_as_fio_and_dcload_do():
    assert parse_size("4g") == 4 * G
    assert parse_size("512M") == 512 * M
    assert parse_size("512mb") == 512 * M
    assert parse_size("1.5g") == 3 * G // 2
    assert parse_size("4096") == 4096
    assert parse_size("4096b") == 4096
    assert parse_size("64KiB") == 64_000, "fio's kb_base=1024: IEC units are powers of 1000"
    assert parse_size("1p") == 1 << 50
    with pytest.raises(ValueError, match="not a size"):
        parse_size("lots")


def test_seed_sizing_rules():
    mem = 4 * G
    assert evaluate_rule("2*mem", mem) == 8 * G  # single streams
    assert evaluate_rule("mem/4", mem) == G  # per multi-writer
    assert evaluate_rule("2*mem/32", mem) == 256 * M  # Axboe test, per file
    assert evaluate_rule("min(512m, mem/4)", mem) == 512 * M  # noisy-neighbor readers
    assert evaluate_rule("min(512m, mem/4)", G) == 256 * M
    assert evaluate_rule("4k", mem) == 4096  # small files


def test_rules_round_down_to_whole_mib():
    assert evaluate_rule("mem/3", G) == 341 * M


@pytest.mark.parametrize("rule", ["", "mem**2", "__import__('os')", "mem/0", "open('x')", "mem - 2*mem"])
def test_bad_rules_are_refused(rule):
    with pytest.raises(ValueError):
        evaluate_rule(rule, G)


def test_format_size():
    assert format_size(8 * G) == "8 GiB"
    assert format_size(1.5 * G) == "1.5 GiB"
    assert format_size(512 * M) == "512 MiB"
