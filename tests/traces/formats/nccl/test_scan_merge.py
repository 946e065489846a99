"""A file's scan put together (traces.formats.nccl.scan_merge): the scans of byte ranges read in parallel,
joined in file order, give the serial scan's trace and report."""

from __future__ import annotations

import pytest
from nccl_text import coll, pre

from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import read_nccl_logs

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


def test_parallel_ranges_give_the_same_trace(tmp_path, monkeypatch):
    # The 2-process path (off by default: slower on the shared machine) splits a file at line starts. The
    # last line's op has garbage glued before it, so its prefix is unknown and its pointer (used by pids 1
    # and 2) ambiguous: skipped, and reported at the same file:line by both paths.
    lines = [pre(pid=1 + i % 2) + coll(opc=f"{i:x}", count=i) for i in range(40)] + [pre() + "x" + coll()[3:]]
    path = tmp_path / "p.log"
    path.write_text("\n".join(lines) + "\n")
    serial, report1 = read_nccl_logs([path])
    monkeypatch.setattr(nccl_log_scan, "PARALLEL_BYTES", 1)
    monkeypatch.setattr(nccl_log_scan, "WORKERS", 2)
    monkeypatch.setattr(nccl_log_scan, "CHUNK_BYTES", 512)
    parallel, report2 = read_nccl_logs([path])
    assert parallel.equals(serial) and len(serial) == 40
    assert report1.examples == report2.examples and report1.skipped == report2.skipped
