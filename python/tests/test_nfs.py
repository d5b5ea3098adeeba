"""dcbench over NFS: dcnfsd started, switched per case and always stopped;
the kernel nfsd's knobs set as the seed sets them and put back."""

import json
import signal
from pathlib import Path

import pytest
from conftest import DCLOAD, dcbench, needs_dcload, needs_root, start_run, wait_for_a_case

from dcbench.errors import UserError
from dcbench.modes import Mode
from dcbench.nfs import Dcnfsd, KernelNfsd

DCNFSD = DCLOAD.parent / "dcnfsd"
needs_dcnfsd = pytest.mark.skipif(not DCNFSD.exists(), reason="needs a release build of dcnfsd (make build)")


def dcnfsd_pids(scratch: Path) -> set[int]:
    """The dcnfsd processes exporting a directory under ``scratch``: this test's, not those of another
    test session running at the same time."""
    return {int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()
            and _comm(p) == "dcnfsd" and str(scratch).encode() in _cmdline(p)}


def _comm(p: Path) -> str:
    try:
        return (p / "comm").read_text().strip()
    except OSError:
        return ""


def _cmdline(p: Path) -> bytes:
    try:
        return (p / "cmdline").read_bytes()
    except OSError:
        return b""


@needs_root
@needs_dcload
@needs_dcnfsd
def test_an_nfs_run_switches_the_server_per_case_and_records_it(scratch, tmp_path):
    results = tmp_path / "results"
    r = dcbench("run", "--nfs", "--dir", str(scratch), "--results", str(results), "--scenarios",
                "seq-write,small-files", "--modes", "buffered,dontcache,writebehind:lazy", "--memory", "256m",
                "--size", "32m", "--no-balloon", "--quiet")
    assert r.returncode == 0, r.stderr + r.stdout
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    nfs = manifest["nfs"]
    assert nfs["server"] == "dcnfsd" and nfs["url"].startswith("nfs://127.0.0.1/export?nfsport=")
    assert nfs["export_fs"] and nfs["stop_problems"] == []
    # Many small files need the sync engines: said, not run.
    assert "nrfiles" in nfs["skipped_scenarios"]["small-files"]
    assert manifest["io"] == {"seq-write": {m: {"writer": "nfs QD16"}
                                            for m in ("buffered", "dontcache", "writebehind:lazy")}}
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert {row["mode"] for row in rows} == {"buffered", "dontcache", "writebehind:lazy"}
    assert all(row["mb_s"] > 0 for row in rows)
    cmd = json.loads((run_dir / "cases/seq-write/dontcache/rep0/command.json").read_text())
    assert "--ioengine=nfs" in cmd["argv"] and "--directory=/seq-write" in cmd["argv"]
    assert not any(a.startswith("--uncached") for a in cmd["argv"]), "the mode is the server's, not the client's"
    assert not dcnfsd_pids(scratch), "the server is stopped"
    assert "modes now read=writebehind:lazy write=writebehind:lazy" in (run_dir / "dcnfsd.stderr").read_text()
    assert not list(scratch.glob("dcbench-*"))


@needs_root
@needs_dcload
@needs_dcnfsd
def test_sigint_of_an_nfs_run_leaves_no_server_and_no_files(scratch, tmp_path):
    results = tmp_path / "results"
    p = start_run("--nfs", "--dir", str(scratch), "--results", str(results), "--scenarios", "seq-write",
                  "--modes", "buffered,writebehind:flusher", "--no-balloon", "--memory", "1g", "--size", "256m",
                  "--repeat", "3")
    kids = wait_for_a_case(p, results)
    assert "dcnfsd" in {c for _, c in kids}, kids
    assert dcnfsd_pids(scratch), "the run's server is found by its export under the scratch directory"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=90)
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    assert not dcnfsd_pids(scratch), "no dcnfsd is left running"
    assert not list(scratch.glob("dcbench-*")), "the export and its files are removed"
    (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "incomplete"
    assert manifest["nfs"]["stop_problems"] == [], manifest["nfs"]


def fake_debugfs(d: Path, splice=True) -> Path:
    d.mkdir()
    (d / "io_cache_read").write_text("0\n")
    (d / "io_cache_write").write_text("0\n")
    if splice:
        (d / "disable-splice-read").write_text("N\n")
    return d


def test_the_kernel_nfsd_knobs_are_set_as_the_seed_sets_them_and_put_back(tmp_path):
    dbg = fake_debugfs(tmp_path / "nfsd")
    (dbg / "io_cache_write").write_text("1\n")  # as someone left it
    server = KernelNfsd(tmp_path / "export", debugfs=dbg, exportfs=False)
    server.start()
    assert server.record()["knobs_before"] == {"io_cache_read": "0", "io_cache_write": "1",
                                               "disable-splice-read": "N"}
    server.set_mode(Mode("direct"))
    assert [(dbg / k).read_text() for k in KernelNfsd.KNOBS] == ["2\n", "2\n", "Y\n"]
    server.set_mode(Mode("buffered"))
    assert [(dbg / k).read_text() for k in KernelNfsd.KNOBS] == ["0\n", "0\n", "N\n"]
    server.set_mode(Mode("dontcache"))
    assert [(dbg / k).read_text() for k in KernelNfsd.KNOBS] == ["1\n", "1\n", "Y\n"]
    assert "no writebehind:flusher mode" in server.supports(Mode("writebehind:flusher"))
    assert server.stop() == []
    assert [(dbg / k).read_text().strip() for k in KernelNfsd.KNOBS] == ["0", "1", "N"]


def test_the_kernel_nfsd_is_refused_where_it_has_no_io_knobs(tmp_path):
    why = KernelNfsd.available(tmp_path / "nowhere")
    assert "io_cache_read" in why and "--nfs dcnfsd" in why
    with pytest.raises(UserError, match="--nfs dcnfsd"):
        KernelNfsd(tmp_path / "export", debugfs=tmp_path / "nowhere", exportfs=False).start()
    # A kernel without disable-splice-read: the io knobs alone.
    dbg = fake_debugfs(tmp_path / "old", splice=False)
    server = KernelNfsd(tmp_path / "export", debugfs=dbg, exportfs=False)
    server.start()
    server.set_mode(Mode("dontcache"))
    assert not (dbg / "disable-splice-read").exists()
    assert server.stop() == []


@needs_root
@needs_dcload
@needs_dcnfsd
def test_an_existing_server_runs_in_the_mode_given_and_keeps_none_of_the_files(scratch, tmp_path):
    # dcnfsd started here stands in for a server dcbench did not start.
    export = scratch / "theirs"
    export.mkdir()
    (export / "their-file").write_text("kept")
    server = Dcnfsd(DCNFSD, export, scratch)
    server.start()
    try:
        server.set_mode(Mode("dontcache"))
        results = tmp_path / "results"
        r = dcbench("run", "--nfs-server", server.url, "--dir", str(scratch), "--results", str(results),
                    "--scenarios", "seq-write,seq-read", "--modes", "dontcache", "--memory", "256m",
                    "--size", "16m", "--no-balloon", "--quiet")
        assert r.returncode == 0, r.stderr + r.stdout
        log = server.log.read_text()
    finally:
        assert server.stop() == []
    (run_dir,) = [p for p in results.iterdir() if p.is_dir()]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    nfs = manifest["nfs"]
    assert nfs["server"] == "existing" and nfs["url"] == server.url and nfs["export_fs"] is None
    assert "as given" in nfs["modes"]
    rows = json.loads((run_dir / "summary.json").read_text())["rows"]
    assert {(row["scenario"], row["mode"]) for row in rows} >= {("seq-write", "dontcache"), ("seq-read", "dontcache")}
    assert all(row["mb_s"] > 0 for row in rows if row["role"] != "*")
    cmd = json.loads((run_dir / "cases/seq-read/dontcache/rep0/command.json").read_text())["argv"]
    assert "--unlink=1" in cmd and "--directory=/" in cmd
    assert sorted(p.name for p in export.iterdir()) == ["their-file"], "every file dcbench made is unlinked"
    assert log.count("modes now") == 1, "dcbench never switched the server's mode"
    assert not list(scratch.glob("dcbench-*"))


@pytest.mark.parametrize("args, said", [
    (["--nfs-server", "fileserver"], "not HOST:/EXPORT"),
    (["--nfs-server", "nfs://fileserver"], "names no export"),
    (["--nfs", "--nfs-server", "h:/x"], "pass one of them"),
])
def test_bad_nfs_server_arguments_are_refused_before_anything_runs(scratch, args, said):
    r = dcbench("run", "--dir", str(scratch), "--modes", "dontcache", *args)
    assert r.returncode == 2, r.stdout + r.stderr
    assert said in r.stderr
    assert not list(scratch.glob("dcbench-*"))


@needs_dcload
def test_an_existing_server_is_refused_more_than_one_mode(scratch, tmp_path):
    r = dcbench("run", "--nfs-server", "h:/x", "--dir", str(scratch), "--results", str(tmp_path),
                "--modes", "buffered,dontcache", "--no-balloon", "--quiet")
    assert r.returncode == 2, r.stdout + r.stderr
    assert "cannot switch an existing server's io mode" in r.stderr
    assert not list(scratch.glob("dcbench-*"))
