"""Monitor parsers against /proc samples captured on the development VM."""

from dcbench import procfs
from conftest import DATA


def test_meminfo_in_bytes():
    m = procfs.parse_meminfo((DATA / "meminfo.txt").read_text())
    assert m["MemTotal"] == 24684092 * 1024
    assert m["Cached"] == 48880 * 1024
    assert m["Dirty"] == 1212 * 1024
    assert m["HugePages_Total"] == 0  # a count, not kB


def test_vmstat_sums_allocstall_zones():
    v = procfs.parse_vmstat((DATA / "vmstat.txt").read_text())
    assert v["nr_dirtied"] == 250702207
    assert v["allocstall"] == 0
    assert "workingset_refault_file" in v


def test_diskstats_of_one_device():
    d = procfs.parse_diskstats((DATA / "diskstats.txt").read_text(), "vda")
    assert (d.reads, d.reads_merged, d.sectors_read) == (36511582, 205516, 408507250)
    assert (d.writes, d.writes_merged, d.sectors_written) == (7951128, 191113, 2779159560)
    assert (d.in_flight, d.io_ticks_ms, d.weighted_ms) == (6, 1668980, 40128574)


def test_diskstats_unknown_device():
    import pytest

    with pytest.raises(KeyError, match="nvme9n9"):
        procfs.parse_diskstats((DATA / "diskstats.txt").read_text(), "nvme9n9")


def test_cpu_percent_between_samples():
    a = procfs.parse_stat_cpu((DATA / "stat.txt").read_text())
    assert (a.user, a.system, a.idle, a.iowait) == (388676, 144957, 598864, 132733)
    b = procfs.CpuTimes(a.user + 10, a.nice, a.system + 30, a.idle + 50, a.iowait + 10, a.irq, a.softirq, a.steal)
    pct = procfs.cpu_percent(a, b)
    assert pct == {"user": 10.0, "system": 30.0, "iowait": 10.0, "idle": 50.0, "steal": 0.0}
    c = procfs.CpuTimes(b.user, b.nice, b.system + 75, b.idle, b.iowait, b.irq, b.softirq, b.steal + 25)
    assert procfs.cpu_percent(b, c) == {"user": 0.0, "system": 75.0, "iowait": 0.0, "idle": 0.0, "steal": 25.0}
