"""Compressed and collected inputs (issue 12, item 4): gzip/bzip2/xz/zstd NCCL text logs, folders (recursive)
and globs, non-trace files skipped with a count."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from traces.formats.files import compression_of, expand_inputs
from traces.readers import ingest
from traces.schema import TraceError

LOGS = Path(__file__).parents[2] / "data" / "nccl_logs"
SAMPLE = LOGS / "sample_09.log"  # 6 hard-wrapped Broadcast lines, 8 ranks (real, source line inside)


def _zstd(data: bytes, out: Path) -> None:
    with pa.CompressedOutputStream(str(out), "zstd") as fh:
        fh.write(data)


WRITERS = {
    "gz": lambda data, out: out.write_bytes(gzip.compress(data)),
    "bz2": lambda data, out: out.write_bytes(bz2.compress(data)),
    "xz": lambda data, out: out.write_bytes(lzma.compress(data)),
    "zst": _zstd,
}


@pytest.mark.parametrize("ext", list(WRITERS))
def test_compressed_nccl_logs_read_as_the_plain_one(tmp_path, ext, nccl_engine):
    plain = ingest(SAMPLE)
    packed = tmp_path / f"sample_09.log.{ext}"
    WRITERS[ext](SAMPLE.read_bytes(), packed)
    assert compression_of(packed) == {"gz": "gzip", "bz2": "bzip2", "xz": "xz", "zst": "zstd"}[ext]
    seen: list[float] = []
    df = ingest(packed, progress=seen.append)
    assert len(df) == 6 and sorted(df["root"]) == [3, 3, 3, 4, 4, 4]
    cols = ["rank", "comm", "seq", "op", "count", "dtype", "root", "nranks"]
    assert df[cols].equals(plain[cols])
    assert sum(seen) == packed.stat().st_size  # progress in the bytes the caller counted (on disk)


def test_corrupt_compressed_log_is_one_clear_error(tmp_path):
    packed = tmp_path / "x.log.gz"
    packed.write_bytes(gzip.compress(SAMPLE.read_bytes())[:200])  # cut mid-stream
    with pytest.raises(TraceError, match=r"x.log.gz: cannot read"):
        ingest(packed)


def test_folder_is_read_recursively_and_non_traces_are_skipped(tmp_path):
    (tmp_path / "node0").mkdir()
    (tmp_path / "node1" / "deep").mkdir(parents=True)
    shutil.copy(LOGS / "sample_07.log", tmp_path / "node0" / "rank0.log")
    (tmp_path / "node1" / "deep" / "rank1.log.gz").write_bytes(gzip.compress((LOGS / "sample_04.log").read_bytes()))
    (tmp_path / "README.md").write_text("NCCL INFO logs of the run\n")  # says NCCL INFO, but is a README
    (tmp_path / "node1" / "notes.txt").write_text("what we saw on node 1\n")  # no trace by content
    (tmp_path / ".cache").mkdir()
    (tmp_path / ".cache" / "old.log").write_text("hidden: never read\n")
    df = ingest(tmp_path)
    meta = df.attrs["collsim"]
    assert len(df) == 14  # 7 COLL lines of sample_07 + 7 of sample_04
    assert [Path(f).name for f in meta["ingest"]["files"]] == ["rank0.log", "rank1.log.gz"]
    assert meta["ingest"]["files_skipped"] == 2
    assert any("skipped 2 file(s) that are not traces: README.md (name), notes.txt (content)" in n
               for n in meta["notes"])


def test_glob_patterns(tmp_path):
    for k in range(3):
        (tmp_path / f"r{k}").mkdir()
        shutil.copy(LOGS / "sample_09.log", tmp_path / f"r{k}" / f"rank{k}.log")
    (tmp_path / "r0" / "README").write_text("x")
    inputs = expand_inputs(str(tmp_path / "**" / "*.log"))
    assert [p.name for p in inputs.files] == ["rank0.log", "rank1.log", "rank2.log"]
    inputs = expand_inputs(str(tmp_path / "r*"))
    assert [p.name for p in inputs.files] == ["rank0.log", "rank1.log", "rank2.log"]
    assert [(p.name, why) for p, why in inputs.skipped] == [("README", "name")]
    with pytest.raises(TraceError, match=r"\*.nope: no file matches this pattern"):
        expand_inputs(str(tmp_path / "*.nope"))


def test_named_files_are_never_skipped(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("# notes\nnothing\n")
    with pytest.raises(TraceError, match="README.md: cannot tell the trace format"):
        ingest(readme)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "LICENSE").write_text("MIT")
    with pytest.raises(TraceError, match="sub: folder holds no trace files .1 skipped by name: LICENSE"):
        ingest(tmp_path / "sub")


def test_inputs_that_are_not_paths_or_regular_files_are_named(tmp_path):
    import os

    for bad in (None, 5, [3]):
        with pytest.raises(TraceError, match="input files are a path|an input file is a path"):
            expand_inputs(bad)
    os.mkfifo(tmp_path / "rank0.log")
    with pytest.raises(TraceError, match=r"rank0\.log: not a regular file \(a FIFO or device\)"):
        expand_inputs([tmp_path / "rank0.log"])


def test_ingest_refuses_an_output_that_is_one_of_its_inputs(tmp_path):
    from traces.readers import ingest_to_parquet

    log = tmp_path / "rank.log"
    shutil.copy(SAMPLE, log)
    with pytest.raises(TraceError, match="the output is one of the input files"):
        ingest_to_parquet([log], log)
    assert log.read_bytes() == SAMPLE.read_bytes()


def test_a_record_nested_too_deeply_is_counted_among_valid_ones():
    from traces.formats.jsonstream import Bad, iter_objects

    got = list(iter_objects('{"a": 1}\n{"b": ' + "[" * 100_000 + "]" * 100_000 + '}\n{"c": 2}\n'))
    assert [o for _, o in got if not isinstance(o, Bad)] == [{"a": 1}, {"c": 2}]
    assert [o.reason for _, o in got if isinstance(o, Bad)] == ["malformed"]
