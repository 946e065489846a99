"""Output safety (issue 13): atomic replacement, devices never removed, run folders complete or marked."""

from __future__ import annotations

import os
import stat

import pandas as pd
import pytest

from sim.results.output import INCOMPLETE_MARKER, RunFolder
from traces.atomic import atomic_output, safe_file_name, short_repr
from traces.formats.nccl.writer import host_files
from traces.schema import TraceError


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "t.parquet"
    target.write_text("old")
    with pytest.raises(OSError):
        with atomic_output(target) as tmp:
            tmp.write_text("half")
            raise OSError(28, "No space left on device")
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.parquet"]


def test_a_fifo_target_is_written_into_and_kept(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        with atomic_output(fifo) as tmp:
            tmp.write_bytes(b"PAR1")
        assert os.read(reader, 16) == b"PAR1"
    finally:
        os.close(reader)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.skipif(not os.path.exists("/dev/full") or not stat.S_ISCHR(os.stat("/dev/full").st_mode),
                    reason="no /dev/full device")
def test_a_full_device_reports_and_survives():
    with pytest.raises(OSError):
        with atomic_output("/dev/full") as tmp:
            tmp.write_bytes(b"x" * 1000)
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_a_folder_target_is_refused(tmp_path):
    with pytest.raises(IsADirectoryError):
        with atomic_output(tmp_path):
            pass


def test_run_folder_is_marked_until_the_summary_is_written(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "summary.json").write_text("{}")  # an earlier run's
    with pytest.raises(KeyboardInterrupt):
        with RunFolder(out) as run:
            run.parquet(pd.DataFrame({"a": [1]}), "collectives.parquet")
            raise KeyboardInterrupt
    assert (out / INCOMPLETE_MARKER).exists() and not (out / "summary.json").exists()
    with RunFolder(out) as run:
        run.summary({"ok": True})
    assert not (out / INCOMPLETE_MARKER).exists() and (out / "summary.json").exists()


@pytest.mark.parametrize("host", ["../escaped", "/etc/passwd", "..", ".", "", "a/../../b", "x\\y", "nul\0l"])
def test_host_file_names_stay_inside(tmp_path, host):
    path = host_files([host], tmp_path)[host]
    assert path.parent == tmp_path and not path.name.startswith(".")
    assert path.resolve().parent == tmp_path.resolve()


def test_hosts_sharing_a_safe_name_are_refused(tmp_path):
    with pytest.raises(TraceError, match="would both be written"):
        host_files(["a/b", "a_b"], tmp_path)


def test_echoes_are_short():
    huge = [[list(range(1000))] * 1000] * 1000  # shared references: a repr would be 10**9 items
    assert len(short_repr(huge)) < 200
    assert len(short_repr("x" * 10**6)) < 100
    assert safe_file_name("node-01") == "node-01"
