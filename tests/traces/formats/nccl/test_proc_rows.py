"""Trace rows one process at a time (traces.formats.nccl.proc_rows): with the per-line data spilled to disk,
the rows of each process and the steps across processes (the TUNING copy, ``seq`` aligned on opCount) give
what the in-memory passes give."""

from __future__ import annotations

import glob
from pathlib import Path

import pandas as pd
from nccl_text import read_all

LOGS = sorted(glob.glob(str(Path(__file__).parents[3] / "data" / "nccl_logs" / "*.log")))
PRE = "h:{pid}:{pid} [{dev}] NCCL INFO "


def test_spilled_passes_give_what_the_in_memory_passes_give(tmp_path: Path, monkeypatch) -> None:
    # Samples read with their per-line data spilled to disk, in chunks of 512 bytes so
    # that every file is several chunks: the replayed passes must keep every order (instances, skip reasons
    # and their first file:line, unprefixed-line owners), so rows, metadata, report (hence --strict's error)
    # and errors are those of the in-memory passes over the same chunks.
    import tempfile

    import traces.formats.nccl.scan as scan
    import traces.formats.nccl.spill as spill

    monkeypatch.setattr(scan, "CHUNK_BYTES", 512)
    # all files at once (every line, skip reasons and pointer owners across files), and the files whose lines
    # hit the rarer rules alone (one-sided ops and bad roots, launchers and unprefixed lines, one process
    # driving two GPUs, a pointer without Init line), so each file's own first file:line is checked too
    alone = [p for p in LOGS if Path(p).name.startswith(("constructed_", "issue"))]
    inputs = [[Path(p) for p in LOGS]] + [[Path(p)] for p in alone]
    expected = [read_all(paths) for paths in inputs]
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the spill folders go here: checked below
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    for paths, want in zip(inputs, expected, strict=True):
        got = read_all(paths)
        if isinstance(want, str) or isinstance(got, str):
            assert got == want
            continue
        pd.testing.assert_frame_equal(got[0], want[0])
        assert got[1:] == want[1:]
    assert not list(tmp_path.glob("collsim-ingest-*"))  # removed at the end


def test_spilled_tuning_copy_and_seq_alignment_by_bucket(tmp_path: Path, monkeypatch) -> None:
    # The spilled steps across processes work a bucket of collectives (TUNING copy) or one inferred comm
    # (seq aligned on opCount) at a time and write back only the rows they change: buckets of 3 rows here,
    # a log without Init lines (the comm is inferred) whose rank 1 starts one collective late (aligned), with
    # TUNING lines on rank 0 only (copied to rank 1).
    import traces.formats.nccl.rowstore as rowstore
    import traces.formats.nccl.spill as spill

    lines = []
    for r in range(2):
        p = PRE.format(pid=10 + r, dev=r)
        for k, count in enumerate([4, 8, 16, 32, 64, 128]):
            if r == 1 and k == 0:
                continue  # this member's log starts at the second collective
            lines.append(f"{p}AllReduce: opCount {k:x} sendbuff 0x1 recvbuff 0x2 count {count} datatype 7 op 0 "
                         f"root 0 comm 0x{r + 5:x} [nranks=2] stream 0x3")
            if r == 0:
                lines.append(f"{p}AllReduce: {count * 4} Bytes -> Algo RING proto {('LL', 'SIMPLE')[k % 2]} "
                             "channel{Lo..Hi}={0..1}")
    log = tmp_path / "cut.log"
    log.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(rowstore, "BUCKET_ROWS", 3)
    results = []
    for spilled in (False, True):
        monkeypatch.setattr(spill, "SPILL_BYTES", 0 if spilled else 1 << 40)
        results.append(read_all([log]))
    (want, want_meta, want_report), (got, got_meta, got_report) = results
    pd.testing.assert_frame_equal(got, want)
    assert (got_meta, got_report) == (want_meta, want_report)
    assert sorted(got.loc[got["rank"] == got["rank"].max(), "seq"]) == [1, 2, 3, 4, 5]  # aligned on opCount
    assert (got["algo"] == "RING").all() and set(got["proto"]) == {"LL", "SIMPLE"}  # copied to the other rank
    assert any("aligned on opCount" in n for n in got_meta["collsim"]["notes"])
