"""NCCL Inspector JSON Lines. No real dump is available here: inputs are written in the line layout of
``plugins/profiler/inspector/inspector_json.cc`` (header / metadata / coll_perf | p2p_perf | dump_stats)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.formats.inspector import looks_like_inspector, looks_like_inspector_prometheus, read_inspector
from traces.readers import detect_format, ingest
from traces.schema import TraceError


def _meta(host: str, pid: int) -> dict:
    return {"inspector_output_format_version": "v4.0", "git_rev": "", "rec_mechanism": "nccl_profiler_interface",
            "dump_timestamp_us": 1748030377748202, "hostname": host, "pid": pid}


def _coll(comm: str, rank: int, nranks: int, host: str, pid: int, coll: str, sn: int, size: int,
          exec_us: int = 50) -> str:
    return json.dumps({"header": {"id": comm, "comm_name": "unknown", "rank": rank, "n_ranks": nranks, "nnodes": 1},
                       "metadata": _meta(host, pid),
                       "coll_perf": {"coll": coll, "coll_sn": sn, "coll_msg_size_bytes": size,
                                     "coll_exec_time_us": exec_us, "coll_timing_source": "kernel_gpu",
                                     "coll_algobw_gbs": 1.0, "coll_busbw_gbs": 1.0}})


def _p2p(comm: str, rank: int, nranks: int, host: str, pid: int, func: str, peer: int, size: int) -> str:
    return json.dumps({"header": {"id": comm, "comm_name": "", "rank": rank, "n_ranks": nranks, "nnodes": 1},
                       "metadata": _meta(host, pid),
                       "p2p_perf": {"p2p": func, "p2p_sn": 0, "p2p_peer": peer, "p2p_msg_size_bytes": size,
                                    "p2p_exec_time_us": 7, "p2p_timing_source": "kernel_gpu",
                                    "p2p_algobw_gbs": 1.0, "p2p_busbw_gbs": 1.0}})


def _stats(comm: str, rank: int, nranks: int, host: str, pid: int, dropped: int) -> str:
    return json.dumps({"header": {"id": comm, "comm_name": "", "rank": rank, "n_ranks": nranks, "nnodes": 1},
                       "metadata": _meta(host, pid),
                       "dump_stats": {"coll_records": 1, "coll_dropped_total": dropped,
                                      "coll_dropped_since_last_dump": dropped, "p2p_records": 0,
                                      "p2p_dropped_total": 0, "p2p_dropped_since_last_dump": 0}})


def _job(tmp_path: Path) -> list[Path]:
    """4 processes; world comm 0xw (ranks in reverse pid order), pair comms {0,2} and {1,3}."""
    files = []
    for g in range(4):
        host, pid = f"node{g // 2}", 1000 + g
        lines = [_stats("0xw", g, 4, host, pid, dropped=3 if g == 0 else 0)]
        lines += [_coll("0xw", g, 4, host, pid, "AllReduce", sn, 8192 * (sn + 1)) for sn in range(3)]
        lines.append(_coll("0xw", g, 4, host, pid, "All2All", 3, 65536))
        pair, crank = f"0xp{g % 2}", g // 2
        lines.append(_p2p(pair, crank, 2, host, pid, "Send" if crank == 0 else "Recv", 1 - crank, 16384))
        path = tmp_path / f"{host}-pid{pid}.log"
        path.write_text("\n".join(lines) + "\n")
        files.append(path)
    return files


def test_rows_bytes_comms(tmp_path: Path) -> None:
    _job(tmp_path)
    df = ingest(tmp_path)
    assert len(df) == 4 * 5
    assert int(df["bytes"].sum()) == 4 * (8192 * (1 + 2 + 3) + 65536 + 16384)
    meta = df.attrs["collsim"]
    assert meta["comms"] == {"0xw": [0, 1, 2, 3], "0xp0": [0, 2], "0xp1": [1, 3]}
    assert meta["world_size"] == 4 and meta["gpus_per_node"] == 2
    assert set(df["dtype"]) == {"int8"} and (df["count"] == df["bytes"]).all()
    assert (df.loc[df["op"] == "AllReduce", "duration_s"] == 50e-6).all()
    sends = df[df["op"] == "Send"].sort_values("rank")
    assert sends["rank"].tolist() == [0, 1] and (sends["root"] == 1).all()
    ar = df[(df["op"] == "AllReduce") & (df["rank"] == 3)]
    assert ar["seq"].tolist() == [0, 1, 2] and ar["bytes"].tolist() == [8192, 16384, 24576]
    assert any("dropped 3 record(s)" in n for n in meta["notes"])


def test_missing_files_of_other_ranks_are_counted(tmp_path: Path) -> None:
    files = _job(tmp_path)
    df, report = read_inspector([files[0]])  # rank 0 alone: its pair comm {0, 2} is half known
    assert len(df) == 4 and report.skipped_total == 1
    with pytest.raises(TraceError, match="pid1000.log:6"):
        read_inspector([files[0]], strict=True)


def test_malformed_line_is_counted_and_strict_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "h-pid1.log"
    path.write_text(_coll("0xa", 0, 1, "h", 1, "AllReduce", 0, 8192) + "\n{not json\n"
                    + _coll("0xa", 0, 1, "h", 1, "AllReduce", 1, 8192) + "\n")
    df, report = read_inspector([path])
    assert len(df) == 2 and report.skipped == {"malformed JSON record": 1}
    with pytest.raises(TraceError, match=r"h-pid1.log:2: malformed JSON record"):
        read_inspector([path], strict=True)


def test_pretty_printed_and_array_forms_read_the_same(tmp_path: Path) -> None:
    lines = [_coll("0xa", r, 2, "h", 1 + r, "AllReduce", sn, 8192 * (sn + 1)) for r in range(2) for sn in range(3)]
    plain = tmp_path / "plain.log"
    plain.write_text("\n".join(lines) + "\n")
    records = [json.loads(line) for line in lines]
    pretty = tmp_path / "pretty.log"  # `jq .` output: one indented object after another
    pretty.write_text("\n".join(json.dumps(r, indent=2) for r in records) + "\n")
    array = tmp_path / "array.json"  # the same objects as one JSON array
    array.write_text(json.dumps(records, indent=1))
    want, _ = read_inspector([plain])
    for path in (pretty, array):
        assert detect_format(path) == "inspector"
        got, report = read_inspector([path])
        assert got.equals(want) and report.skipped_total == 0 and len(got) == 6


def test_torn_last_line_is_counted(tmp_path: Path) -> None:
    path = tmp_path / "h-pid1.log"
    whole = _coll("0xa", 0, 1, "h", 1, "AllReduce", 0, 8192)
    path.write_text(whole + "\n" + whole[:40])
    df, report = read_inspector([path])
    assert len(df) == 1 and report.skipped == {"truncated last record (the writer was stopped mid-write)": 1}


def test_detection(tmp_path: Path) -> None:
    line = _coll("0xa", 0, 1, "h", 1, "AllReduce", 0, 8192)
    assert looks_like_inspector(line)
    assert not looks_like_inspector('{"traceEvents": []}')
    prom = tmp_path / "h.prom"
    prom.write_text('# HELP nccl_coll_busbw_gbs bus bandwidth\n# TYPE nccl_coll_busbw_gbs gauge\n'
                    'nccl_coll_busbw_gbs{coll="AllReduce"} 12.5\n')
    assert looks_like_inspector_prometheus(prom.read_text())
    with pytest.raises(TraceError, match="Prometheus.*not supported"):
        detect_format(prom)


@settings(max_examples=10)  # each example pays pandas' fixed cost (~0.1 s)
@given(st.integers(1, 6), st.lists(st.integers(8192, 1 << 30), min_size=1, max_size=8))
def test_every_rank_reports_every_op(nranks: int, sizes: list[int]) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for r in range(nranks):
            lines = [_coll("0xc", r, nranks, "h", 10 + r, "ReduceScatter", sn, s) for sn, s in enumerate(sizes)]
            Path(tmp, f"h-pid{10 + r}.log").write_text("\n".join(lines) + "\n")
        df = ingest(tmp, format="inspector")
    assert len(df) == nranks * len(sizes)
    assert int(df["bytes"].sum()) == nranks * sum(sizes)
    assert (df.groupby("rank")["seq"].max() == len(sizes) - 1).all()


def test_real_pretty_printed_records_from_nvidias_documentation() -> None:
    # tests/data/inspector/README.md: the two records of NVIDIA's Inspector README, pretty-printed as there.
    path = Path(__file__).parents[2] / "data" / "inspector" / "nvidia_readme_pretty.log"
    assert detect_format(path) == "inspector"
    df, report = read_inspector([path])
    # Two communicators of 8, one rank of each seen: the largest (tie broken by name) is the world view; the
    # other's members cannot be told, so its record is skipped and counted, not guessed.
    assert report.lines_read == 2 and len(df) == 1
    row = df.iloc[0]
    assert (row["rank"], row["comm"], row["op"], row["count"], row["dtype"]) == (
        4, "0xe62dedaa97644a", "ReduceScatter", 2147483648, "int8")
    assert row["duration_s"] == pytest.approx(41057e-6)
    assert report.skipped == {"comm rank cannot be mapped to a global rank (files of other ranks missing?)": 1}
    assert df.attrs["collsim"]["comms"] == {"0xe62dedaa97644a": list(range(8))}
