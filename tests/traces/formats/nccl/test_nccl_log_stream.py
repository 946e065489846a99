"""`simrun ingest` streams NCCL logs to Parquet a row group at a time: the same rows, metadata and errors as
`traces.ingest` + `write_trace`, whatever the block size."""

from __future__ import annotations

import glob
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from nccl_text import read_all

import traces.formats.nccl.output as output
from traces.errors import TraceError
from traces.io import read_trace, write_trace
from traces.readers import ingest, ingest_to_parquet

LOGS = sorted(glob.glob(str(Path(__file__).parents[3] / "data" / "nccl_logs" / "*.log")))
PRE = "h:{pid}:{pid} [{dev}] NCCL INFO "


def _both(paths, tmp_path: Path) -> tuple[Path, Path]:
    """The trace written by ingest + write_trace, and by ingest_to_parquet."""
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    write_trace(ingest(paths), a)
    n_rows, n_ranks, meta = ingest_to_parquet(paths, b)
    df = read_trace(b)
    assert (n_rows, n_ranks) == (len(df), df["rank"].nunique())
    assert meta == df.attrs["collsim"]
    return a, b


def _has_rows(path: str) -> bool:
    try:
        return len(ingest(path)) > 0
    except TraceError:
        return False


@pytest.mark.parametrize("block_rows", [1, 3, 1 << 17])
def test_stream_gives_the_rows_and_metadata_of_ingest(tmp_path: Path, monkeypatch, block_rows: int) -> None:
    monkeypatch.setattr(output, "BLOCK_ROWS", block_rows)
    inputs = [p for p in LOGS if _has_rows(p)]
    assert len(inputs) >= 5
    # The 2019 RCCL sample's clock readings lie 6 years before the 2025 ones: read together, they are more
    # than the schema's 1e6 s apart and refused (test_nccl_log_unseen.py); every other log goes in together.
    together = [p for p in inputs if "rtg_tracer" not in p]
    for paths in [*inputs, together]:
        a, b = _both(paths, tmp_path)
        x, y = read_trace(a), read_trace(b)
        pd.testing.assert_frame_equal(x, y)
        assert x.attrs == y.attrs
        groups = pq.ParquetFile(b).num_row_groups
        assert groups == max(1, -(-len(x) // block_rows))
        if groups == 1:  # one row group: the very same bytes as write_trace
            assert a.read_bytes() == b.read_bytes()


def test_stream_refuses_what_ingest_refuses(tmp_path: Path) -> None:
    for path in LOGS:
        if _has_rows(path):
            continue
        with pytest.raises(TraceError) as api:
            ingest(path)
        with pytest.raises(TraceError) as cli:
            ingest_to_parquet(path, tmp_path / "x.parquet")
        assert str(api.value) == str(cli.value)
        assert "NCCL_DEBUG_SUBSYS=COLL" in str(cli.value)  # the reader's hint is kept
        assert not (tmp_path / "x.parquet").exists()


def _log(tmp_path: Path, counts: list[int]) -> Path:
    lines = []
    for r in range(2):
        p = PRE.format(pid=10 + r, dev=r)
        lines.append(f"{p}comm 0x{r + 1:x} rank {r} nranks 2 cudaDev {r} nvmlDev {r} busId 1000 commId 0xabc "
                     "- Init COMPLETE")
        for k, count in enumerate(counts):
            lines.append(f"{p}AllReduce: opCount {k:x} sendbuff 0x1 recvbuff 0x2 count {count} datatype 7 op 0 "
                         f"root 0 comm 0x{r + 1:x} [nranks=2] stream 0x3")
    path = tmp_path / "two.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_bad_row_in_a_later_block_is_named_as_in_the_whole_trace(tmp_path: Path, monkeypatch) -> None:
    # count x 4 bytes above 2**53: refused by the row checks, in rank 1's third row (row 5 of the trace)
    path = _log(tmp_path, [4, 8, 1 << 52])
    monkeypatch.setattr(output, "BLOCK_ROWS", 2)
    with pytest.raises(TraceError) as api:
        ingest(path)
    with pytest.raises(TraceError) as streamed:
        ingest_to_parquet(path, tmp_path / "x.parquet")
    assert str(api.value) == str(streamed.value)
    assert str(streamed.value).startswith(f"{path}: row 2: ")  # the input named, as every reader does
    assert not (tmp_path / "x.parquet").exists()


def test_members_that_disagree_are_refused_by_the_checks_across_rows(tmp_path: Path, monkeypatch) -> None:
    path = _log(tmp_path, [4, 8])
    text = path.read_text().splitlines()
    text[-1] = text[-1].replace("count 8", "count 9")  # rank 1's second AllReduce: 9 elements, rank 0's 8
    path.write_text("\n".join(text) + "\n")
    monkeypatch.setattr(output, "BLOCK_ROWS", 1)
    with pytest.raises(TraceError) as api:
        write_trace(ingest(path), tmp_path / "a.parquet")
    with pytest.raises(TraceError) as streamed:
        ingest_to_parquet(path, tmp_path / "x.parquet")
    assert str(api.value) == str(streamed.value)
    assert "field 'count'" in str(streamed.value)
    assert not (tmp_path / "x.parquet").exists()


def test_compressed_files_and_folders_stream_to_the_same_rows(tmp_path: Path, monkeypatch) -> None:
    import bz2
    import gzip
    import lzma
    import shutil

    monkeypatch.setattr(output, "BLOCK_ROWS", 4)
    inputs = [p for p in LOGS if _has_rows(p)][:3]
    folder = tmp_path / "logs"
    (folder / "sub").mkdir(parents=True)
    (folder / "README.md").write_text("3 logs\n")  # skipped by name, and counted
    openers = [gzip.open, bz2.open, lzma.open]
    for k, path in enumerate(inputs):
        with open(path, "rb") as src, openers[k](folder / "sub" / f"{k}_{Path(path).name}.z", "wb") as dst:
            shutil.copyfileobj(src, dst)
    plain = tmp_path / "plain"
    plain.mkdir()
    for k, path in enumerate(inputs):
        shutil.copy(path, plain / f"{k}_{Path(path).name}.z")
    a, b = _both([str(folder)], tmp_path)
    x, y = read_trace(a), read_trace(b)
    pd.testing.assert_frame_equal(x, y)
    assert x.attrs == y.attrs and y.attrs["collsim"]["ingest"]["files_skipped"] == 1
    ingest_to_parquet([str(plain)], tmp_path / "c.parquet")  # the same logs uncompressed: the same rows
    z = read_trace(tmp_path / "c.parquet")
    pd.testing.assert_frame_equal(y, z)


def test_spill_folder_is_removed_on_an_error(tmp_path: Path, monkeypatch) -> None:
    import tempfile

    import traces.formats.nccl.spill as spill
    from traces.formats.nccl.reader import scan_nccl_logs

    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spill, "SPILL_BYTES", 0)
    with pytest.raises(TraceError, match="binary data"):
        scan_nccl_logs([Path(LOGS[0]), binary])  # the first file is spilled, then the second fails
    assert not list(tmp_path.glob("collsim-ingest-*"))


def test_spilled_rows_stream_and_check_as_in_memory(tmp_path: Path, monkeypatch) -> None:
    # Spilled rows read back by block and checked a bucket of collectives at a time (buckets of 3 rows):
    # the same Parquet rows, metadata, all-to-all-v splits, disagreement example and check errors.
    import traces.formats.nccl.rowstore as rowstore
    import traces.formats.nccl.spill as spill

    lines = []
    for r in range(2):
        p = PRE.format(pid=10 + r, dev=r)
        lines.append(f"{p}comm 0x{r + 1:x} rank {r} nranks 2 cudaDev {r} nvmlDev {r} busId 1000 commId 0xabc "
                     "- Init COMPLETE")
        for k, count in enumerate([4, 8]):
            lines.append(f"{p}AllReduce: opCount {k:x} sendbuff 0x1 recvbuff 0x2 count {count} datatype 7 op 0 "
                         f"root 0 comm 0x{r + 1:x} [nranks=2] stream 0x3")
        for peer in range(2):  # an uneven all-to-all: one group of Sends and Recvs to and from every rank
            for op, buf in (("Send", "sendbuff 0x1 recvbuff (nil)"), ("Recv", "sendbuff (nil) recvbuff 0x2")):
                lines.append(f"{p}{op}: opCount 2 {buf} count {(r + 1) * (peer + 2)} datatype 7 op 0 root {peer} "
                             f"comm 0x{r + 1:x} [nranks=2] stream 0x3")
    alltoall = tmp_path / "a2a.log"
    alltoall.write_text("\n".join(lines) + "\n")
    bad = _log(tmp_path, [4, 8])
    text = bad.read_text().splitlines()
    text[-1] = text[-1].replace("count 8", "count 9")
    bad.write_text("\n".join(text) + "\n")
    monkeypatch.setattr(output, "BLOCK_ROWS", 2)
    monkeypatch.setattr(rowstore, "BUCKET_ROWS", 3)

    def run(paths: list[Path], spilled: bool, out: Path):
        monkeypatch.setattr(spill, "SPILL_BYTES", 0 if spilled else 1 << 40)
        try:
            ingest_to_parquet(paths, out)
        except TraceError as exc:
            return read_all(paths), str(exc)
        return read_all(paths), read_trace(out)

    (want, a), (got, b) = run([alltoall], False, tmp_path / "m.parquet"), run([alltoall], True, tmp_path / "s.parquet")
    assert sum(len(s) > 0 for s in want[0]["split_bytes"]) == 2  # one folded AllToAll row per rank
    pd.testing.assert_frame_equal(got[0], want[0])
    assert got[1:] == want[1:]
    pd.testing.assert_frame_equal(a, b)
    assert a.attrs == b.attrs
    (want, a), (got, b) = run([bad], False, tmp_path / "m.parquet"), run([bad], True, tmp_path / "s.parquet")
    assert want[2]["disagreeing_example"] and got[1:] == want[1:]
    assert a == b and "field 'count'" in b
