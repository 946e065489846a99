"""Cases of session 21: inputs nobody had shown us, found by attacking every reader, option and file kind.

Trace metadata that is not UTF-8, nested too deeply or has optional keys of the wrong type; a null
communicator; an uneven AllToAll whose ``count`` disagrees with its ``split_bytes``; folders, FIFOs and
empty names given as files; an output that is one of the inputs; Kineto and Execution Trace JSON nested too
deeply or with fields of the wrong type; NCCL logs with garbage lines between valid ones; bad seeds and
number options of ``synth`` and ``simulate_flows``. Cases marked ``slow`` replay or ingest for real.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from bad_inputs_cases.common import (
    Case,
    Outcome,
    base_rows,
    read_call,
    run_args,
    small_trace,
    trace,
    with_value,
)

__all__ = ["CASES"]

ROOT = Path(__file__).resolve().parents[2]
NCCL_LOG = ROOT / "tests/data/nccl_logs/constructed_v2_29.log"
KINETO = ROOT / "tests/data/traces/kineto/01_hta_ddp_2rank_rank0_collective_subset.json"
INSPECTOR = ROOT / "tests/data/inspector/nvidia_readme_pretty.log"
DEEP = 100_000  # levels of nesting: beyond any JSON parser's stack


def written(d: Path, name: str, data: bytes | str) -> Path:
    path = d / name
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


def raw_meta_trace(d: Path, meta: bytes, name: str = "meta.parquet") -> Path:
    """A valid table whose ``collsim`` metadata is the given bytes, as another tool might write it."""
    table = pa.Table.from_pandas(base_rows(), preserve_index=False).replace_schema_metadata({"collsim": meta})
    pq.write_table(table, d / name)
    return d / name


def both(cid: str, what: str, expect: str, make: Callable[[Path], Path]) -> list[Case]:
    """The CLI case (``simrun run``) and the API case (``read_trace``) of one bad trace file."""
    return [Case(cid, what, argv=run_args(make), expect=expect),
            Case(cid + "-api", what + " (read_trace)", call=read_call(make), error="TraceError")]


def meta_case(cid: str, what: str, expect: str, change: Callable[[dict], Any]) -> list[Case]:
    return both(cid, what, expect, lambda d: trace(d, None, change))


def uneven_alltoall(df: pd.DataFrame) -> pd.DataFrame:
    """Every row an AllToAll of 64 KiB per peer whose split_bytes add up to 10 bytes."""
    return df.assign(op="AllToAll", count=1 << 14, bytes=1 << 16, split_bytes=[[1, 2, 3, 4]] * len(df))


def fifo(d: Path, name: str) -> Path:
    os.mkfifo(d / name)
    return d / name


def kineto_with(d: Path, change: Callable[[dict], None], name: str = "k.json") -> Path:
    """The Kineto sample with ``change`` applied to each record_param_comms event."""
    data = json.loads(KINETO.read_text())
    for event in data["traceEvents"]:
        if isinstance(event, dict) and event.get("name") == "record_param_comms":
            change(event)
    return written(d, name, json.dumps(data))


def set_args(key: str, value: Any) -> Callable[[dict], None]:
    return lambda e: e["args"].__setitem__(key, value)


def deep_json(prefix: bytes, suffix: bytes) -> bytes:
    return prefix + b"[" * DEEP + b"]" * DEEP + suffix


def garbage_log(d: Path) -> Path:
    """The NCCL sample with 15 lines of garbage between its lines (9 text, 6 COLL lines with a bad count)."""
    out = []
    for i, line in enumerate(NCCL_LOG.read_text().splitlines(keepends=True)):
        out.append(line)
        if i % 2 == 0:
            out.append("garbage: the quick brown fox NCCL INFO AllReduce: opCount zz\n")
        if i % 3 == 0:
            out.append("host1:123:456 [0] NCCL INFO AllReduce: opCount 7 sendbuff 0x0 recvbuff 0x0 count banana "
                       "datatype 7\n")
    return written(d, "garbage.log", "".join(out))


def check_garbage_counted(folder: Path, out: Outcome) -> str | None:
    """The valid lines give the rows of the clean log; the 15 garbage lines are counted as skipped."""
    from traces import ingest

    if "15 malformed COLL line" not in out.stdout:
        return f"the garbage lines are not counted: {out.stdout.strip()[-200:]!r}"
    key = ["rank", "comm", "seq", "op", "count", "dtype", "t_start_s"]
    clean = ingest([NCCL_LOG])[key].astype(str).values.tolist()
    got = pd.read_parquet(folder / "g.parquet")[key].astype(str).values.tolist()
    return None if got == clean else f"valid lines lost or changed: {len(got)} rows, clean log {len(clean)}"


def check_input_intact(name: str, original: Path) -> Callable[[Path, Outcome], str | None]:
    def check(folder: Path, _: Outcome) -> str | None:
        return None if (folder / name).read_bytes() == original.read_bytes() else f"{name} was overwritten"
    return check


def copy_of(path: Path, name: str) -> Callable[[Path], Path]:
    return lambda d: written(d, name, path.read_bytes())


def check_extra_column_kept(folder: Path, _: Any) -> str | None:
    """An unknown extra column is kept as it is by read_trace (traces/schema.py normalize)."""
    from traces import read_trace

    df = read_trace(trace(folder, lambda f: f.assign(zzz_note="kept")))
    return None if "zzz_note" in df.columns and (df["zzz_note"] == "kept").all() else "the extra column was dropped"


def flows_file(d: Path, text: str) -> Path:
    return written(d, "flows.csv", text)


def api(fn: Callable[[Path], Any]) -> Callable[[Path], Callable[[], Any]]:
    return lambda d: (lambda: fn(d))


def _flows(seed: Any) -> Any:
    import sim
    import topologies

    g = topologies.build("fat_tree", num_gpus=4)
    return sim.simulate_flows(g, pd.DataFrame({"src": [0], "dst": [1], "bytes": [1e6], "start_s": [0.0]}), seed=seed)


def _synth(**plan: Any) -> Any:
    import traces

    return traces.synthesize("deepseek-v3", **plan)


def _ingest(paths: Any) -> Any:
    import traces

    return traces.ingest(paths)


CASES: list[Case] = [
    # trace metadata
    *both("meta-not-utf8", "metadata bytes in latin-1", "metadata key 'collsim' is not JSON",
          lambda d: raw_meta_trace(d, b'{"schema_version": 1, "world_size": 4, "source": "r\xe9seau"}')),
    *both("meta-deep", f"metadata JSON nested {DEEP} deep", "metadata key 'collsim' is JSON nested too deeply",
          lambda d: raw_meta_trace(d, deep_json(b"", b""))),
    *meta_case("meta-parallelism", "metadata parallelism as text", "metadata 'parallelism' must be a JSON object",
               lambda m: {**m, "parallelism": "tp=8"}),
    *meta_case("meta-rings", "metadata rings as text", "metadata 'rings' must be a JSON object",
               lambda m: {**m, "rings": "x"}),
    *meta_case("meta-rings-flat", "metadata rings of one comm a flat list", "metadata 'rings'['c0'] must be a list",
               lambda m: {**m, "rings": {"c0": [0, 1, 2, 3]}}),
    *meta_case("meta-notes", "metadata notes as text", "metadata 'notes' must be a list of strings",
               lambda m: {**m, "notes": "x"}),
    *meta_case("meta-origin", "metadata time_origin_s as text", "metadata 'time_origin_s' must be a finite number",
               lambda m: {**m, "time_origin_s": "x"}),
    # trace rows
    *both("comm-null", "a null comm (was read as a communicator '')", "field 'comm' is missing (null)",
          lambda d: trace(d, with_value("comm", None))),
    *both("split-count", "an uneven AllToAll whose count disagrees with its split_bytes",
          "field 'count' is not the mean elements per peer of split_bytes", lambda d: trace(d, uneven_alltoall)),
    *both("op-null", "a null op", "unknown op: ''", lambda d: trace(d, with_value("op", None))),
    *both("rank-null", "a null rank", "field 'rank' is missing", lambda d: trace(d, with_value("rank", None, dtype="Int64"))),
    *both("column-missing", "no rank column", "trace lacks column(s): rank",
          lambda d: trace(d, lambda f: f.drop(columns=["rank"]))),
    *both("nranks-zero", "nranks 0", "field 'nranks' is not in 1..", lambda d: trace(d, lambda f: f.assign(nranks=0))),
    Case("extra-column", "an unknown extra column is kept", call=api(lambda d: check_extra_column_kept(d, None))),
    # files that are not what they say
    *both("trace-folder", "a folder as the trace", "is a folder, not a Parquet trace", lambda d: d),
    *both("trace-fifo", "a FIFO as the trace (read it and it blocks)", "not a regular file (a FIFO or device)",
          lambda d: fifo(d, "t.parquet")),
    *both("trace-gzip", "a gzip'd Parquet named .parquet", "not a readable Parquet trace",
          lambda d: written(d, "g.parquet", gzip.compress(small_trace(d).read_bytes()))),
    *both("trace-half-footer", "a Parquet file cut inside its footer", "not a readable Parquet trace",
          lambda d: written(d, "h.parquet", small_trace(d).read_bytes()[:-20])),
    Case("trace-empty-name", "--trace ''", argv=lambda d: ["run", "--trace", "", "--topo", "fat_tree", "--out", str(d / "o")],
         expect="the trace name is empty"),
    Case("trace-unicode-path", "a trace and output path with spaces and non-ASCII letters", code=0, slow=True,
         argv=lambda d: ["run", "--trace", str(written(d, "t r é.parquet", small_trace(d).read_bytes())), "--topo",
                         "fat_tree", "--out", str(d / "o ü"), "--no-report"]),
    Case("trace-chmod-000", "a trace with mode 000 (root still reads it: run works or refuses, no traceback)",
         code=None, slow=True,
         argv=lambda d: run_args(lambda e: (small_trace(e), os.chmod(e / "small.parquet", 0))[0])(d)),
    # an output that is one of the inputs
    Case("ingest-out-is-input", "ingest rank.log -o rank.log (would replace the log)",
         argv=lambda d: ["ingest", str(copy_of(NCCL_LOG, "rank.log")(d)), "-o", str(d / "rank.log")],
         expect="the output is one of the input files", check=check_input_intact("rank.log", NCCL_LOG)),
    Case("export-out-is-input", "export t.parquet -o t.parquet (would replace the trace)",
         argv=lambda d: ["export", str(small_trace(d)), "--format", "nccl", "-o", str(d / "small.parquet")],
         expect="the output is the trace being exported"),
    Case("ingest-fifo", "ingest of a FIFO", argv=lambda d: ["ingest", str(fifo(d, "r.log")), "-o", str(d / "i.parquet")],
         expect="not a regular file (a FIFO or device)"),
    Case("ingest-none-api", "traces.ingest(None)", call=lambda d: (lambda: _ingest(None)), error="TraceError"),
    # JSON traces
    Case("kineto-deep", f"a Kineto file nested {DEEP} deep",
         argv=lambda d: ["ingest", str(written(d, "k.json", deep_json(b'{"traceEvents": ', b"}"))), "-o", str(d / "i.parquet")],
         expect="k.json: JSON nested too deeply"),
    Case("et-deep", f"an Execution Trace nested {DEEP} deep",
         argv=lambda d: ["ingest", str(written(d, "e.json", deep_json(b'{"schema": "1.0.3-chakra", "nodes": ', b"}"))),
                         "--format", "param", "-o", str(d / "i.parquet")], expect="e.json: JSON nested too deeply"),
    Case("kineto-ts-text", "Kineto records with ts as text: skipped and counted", expect="Kineto event with a field of the wrong type",
         argv=lambda d: ["ingest", str(kineto_with(d, lambda e: e.__setitem__("ts", "abc"))), "--format", "kineto", "-o",
                         str(d / "i.parquet")]),
    Case("kineto-args-list", "Kineto records with args a list: skipped and counted",
         expect="Kineto event with a field of the wrong type",
         argv=lambda d: ["ingest", str(kineto_with(d, lambda e: e.__setitem__("args", [1, 2]))), "--format", "kineto",
                         "-o", str(d / "i.parquet")]),
    Case("kineto-count-huge", "Kineto In msg nelems 10**30 (overflowed int64)", expect="is outside 0..2**53",
         argv=lambda d: ["ingest", str(kineto_with(d, set_args("In msg nelems", 10**30))), "--format", "kineto", "-o",
                         str(d / "i.parquet")]),
    Case("kineto-distinfo-list", "Kineto distributedInfo a list", expect="'distributedInfo' must be a JSON object",
         argv=lambda d: ["ingest", str(written(d, "k.json", json.dumps({**json.loads(KINETO.read_text()),
                                                                        "distributedInfo": [1]}))),
                         "--format", "kineto", "-o", str(d / "i.parquet")]),
    Case("inspector-deep", "an Inspector record nested too deeply among valid ones: counted, the rest kept", code=0,
         slow=True, argv=lambda d: ["ingest", str(written(d, "insp.log", INSPECTOR.read_bytes() + b"\n"
                                                     + deep_json(b'{"a": ', b"}\n"))), "--format", "inspector", "-o",
                                    str(d / "i.parquet")],
         check=lambda d, out: None if "malformed JSON record" in out.stdout else f"not counted: {out.stdout[-200:]!r}"),
    # NCCL logs with garbage between valid lines
    Case("nccl-garbage-lines", "an NCCL log with 15 garbage lines: valid lines kept, garbage counted", code=0, slow=True,
         argv=lambda d: ["ingest", str(garbage_log(d)), "-o", str(d / "g.parquet")], check=check_garbage_counted),
    # synth and flows options
    Case("synth-mfu-nan", "synth --set mfu=nan", expect="option 'mfu' must be a finite number in (0, 1]",
         argv=lambda d: ["synth", "deepseek-v3", "--set", "mfu=nan", "-o", str(d / "s.parquet")]),
    Case("synth-mfu-2", "synth --set mfu=2 (200 % of peak)", expect="option 'mfu' must be a finite number in (0, 1]",
         argv=lambda d: ["synth", "deepseek-v3", "--set", "mfu=2", "-o", str(d / "s.parquet")]),
    Case("synth-seed-neg", "synth --seed -1", expect="option 'seed' must be an integer from 0 to 2**63-1",
         argv=lambda d: ["synth", "deepseek-v3", "--seed", "-1", "-o", str(d / "s.parquet")]),
    Case("synth-rate-nan-api", "synthesize(arrival_rate=nan) (gave an empty trace)",
         call=lambda d: (lambda: _synth(arrival_rate=float("nan"))), error="TraceError"),
    Case("synth-rate-inf", "synth --arrival-rate inf", expect="option 'arrival_rate' must be a finite number >= 0",
         argv=lambda d: ["synth", "deepseek-v3", "--arrival-rate", "inf", "-o", str(d / "s.parquet")]),
    Case("flows-seed-text-api", "simulate_flows(seed='x')", call=lambda d: (lambda: _flows("x")), error="OptionError"),
    Case("flows-bytes-huge", "a flow of 1e30 bytes", expect="is not a whole number in 0..9007199254740992",
         argv=lambda d: ["flows", str(flows_file(d, "src,dst,bytes,start_s\n0,1,1e30,0\n")), "--topo", "fat_tree",
                         "-o", str(d / "f")]),
    Case("flows-start-huge", "a flow starting at 1e300 s", expect="is not a number in 0..1e+06",
         argv=lambda d: ["flows", str(flows_file(d, "src,dst,bytes,start_s\n0,1,100,1e300\n")), "--topo", "fat_tree",
                         "-o", str(d / "f")]),
    Case("bench-factor-inf", "bench -f inf (overflowed int)", expect="factor inf must be > 1 and finite",
         argv=lambda d: ["bench", "all_reduce", "--topo", "fat_tree", "-f", "inf", "-o", str(d / "b")]),
    Case("bench-rows-huge", "bench -b 1 -e 1G -i 1 (10**9 rows: hung)", expect="more than the limit of 10,000",
         argv=lambda d: ["bench", "all_reduce", "--topo", "fat_tree", "-b", "1", "-e", "1G", "-i", "1", "-o", str(d / "b")]),
    Case("topo-draw-nosuffix", "topo --draw without a suffix", expect="cannot draw a file without a suffix",
         argv=lambda d: ["topo", "fat_tree", "--draw", str(d / "fabric")]),
]
