"""Cases of the newer commands and options: ``bench``, ``validate``, ``compare``, ``--model``, ``--timing``,
time-windowed and flapping link failures, ``--set gpu=/nic=`` presets, compressed inputs, Flight Recorder
pickles that carry objects, and folders or globs given to ``ingest``."""

from __future__ import annotations

import gzip
import os
import pickle
from pathlib import Path

import pandas as pd

from bad_inputs_cases.common import Case, Outcome, run_args, small_trace

__all__ = ["CASES"]

ROOT = Path(__file__).resolve().parents[2]
NCCL_LOG = ROOT / "tests/data/nccl_logs/constructed_v2_29.log"
NCCL_TESTS = ROOT / "tests/data/nccl_tests/gcp_a3high_1x8_h100.txt"


def bench(*extra: str):
    return lambda d: ["bench", "all_reduce", "--topo", "fat_tree", "-o", str(d / "b"), *extra]


def written(d: Path, name: str, data: bytes) -> Path:
    path = d / name
    path.write_bytes(data)
    return path


class _RunsCode:
    """Unpickling this runs a shell command: a Flight Recorder reader must refuse it, not run it."""

    def __reduce__(self):
        return (os.system, ("touch PWNED",))


def evil_pickle(d: Path) -> Path:
    dump = {"version": "2.4", "pg_config": {}, "pg_status": {}, "entries": [_RunsCode()]}
    return written(d, "nccl_trace_rank_0", pickle.dumps(dump, protocol=2))


def object_pickle(d: Path) -> Path:
    import datetime

    dump = {"version": "2.4", "pg_config": {}, "pg_status": {}, "entries": [{"time": datetime.datetime(2024, 1, 1)}]}
    return written(d, "nccl_trace_rank_1", pickle.dumps(dump, protocol=2))


def check_not_run(folder: Path, _: Outcome) -> str | None:
    return "unpickling ran the pickle's command" if (folder / "PWNED").exists() else None


def check_compressed_same(folder: Path, _: Outcome) -> str | None:
    """A gzip'd and a zstd'd copy of a log ingest to the same trace as the plain file."""
    import subprocess
    import sys

    import pyarrow as pa

    raw = NCCL_LOG.read_bytes()
    plain = written(folder, "plain.log", raw)
    gz = written(folder, "gz.log.gz", gzip.compress(raw, mtime=0))
    zst_path = folder / "zst.log.zst"  # pyarrow's zstd codec, as the reader's first choice
    with pa.CompressedOutputStream(pa.OSFile(str(zst_path), "wb"), "zstd") as stream:
        stream.write(raw)
    zst = zst_path
    frames = []
    for src in (plain, gz, zst):
        out = folder / f"{src.name}.parquet"
        res = subprocess.run([sys.executable, "-m", "sim", "ingest", str(src), "-o", str(out)], capture_output=True,
                             text=True, cwd=folder, timeout=120)
        if res.returncode:
            return f"ingest {src.name} failed: {res.stderr.strip()[-200:]}"
        frames.append(pd.read_parquet(out).drop(columns=["host"], errors="ignore"))
    return None if all(frames[0].equals(f) for f in frames[1:]) else "compressed inputs ingest differently"


def check_skipped_counted(folder: Path, out: Outcome) -> str | None:
    """A folder with a log and a README: the log is read, the README skipped and counted, not silently dropped."""
    if "skipped 1 file(s) that are not traces: README.md" not in out.stdout:
        return f"the skipped README is not reported: {out.stdout.strip()[-200:]!r}"
    return None if (folder / "i.parquet").exists() else "no trace written"


def mixed_folder(d: Path) -> Path:
    logs = d / "logs"
    logs.mkdir()
    (logs / "rank.log").write_bytes(NCCL_LOG.read_bytes())
    (logs / "README.md").write_text("# how these logs were taken\n")
    return logs


CASES: list[Case] = [
    # simrun bench
    Case("bench-factor-1", "bench -f 1 (would never reach -e)", argv=bench("-f", "1"), expect="factor 1.0 must be > 1"),
    Case("bench-step-0", "bench -i 0", argv=bench("-i", "0"), expect="step 0 must be > 0"),
    Case("bench-min-max", "bench -b 1M -e 8", argv=bench("-b", "1M", "-e", "8"), expect="exceeds maximum size"),
    Case("bench-size-text", "bench -b abc", argv=bench("-b", "abc"), expect="size 'abc' is not a number"),
    Case("bench-size-huge", "bench -e 1000000T (bytes beyond float64's exact range)", argv=bench("-b", "8", "-e", "1000000T"),
         expect="exceeds 9007199254740992 bytes"),
    Case("bench-nodes-0", "bench --nodes 0", argv=bench("--nodes", "0"), expect="--nodes"),
    Case("bench-nodes-huge", "bench --nodes 10**8", argv=bench("--nodes", "100000000"), expect="is above the limit of 65,536"),
    Case("bench-dtype", "bench -d complex", argv=bench("-d", "complex"), expect="datatype 'complex' is not one of"),
    Case("bench-root", "bench broadcast -r 99 on 8 ranks",
         argv=lambda d: ["bench", "broadcast", "--topo", "fat_tree", "-r", "99", "-e", "1K", "-o", str(d / "b")],
         expect="root 99 is not a rank of 8"),
    Case("bench-algo", "bench --algo warp", argv=bench("--algo", "warp"), expect="NCCL_ALGO 'warp'"),
    Case("bench-proto", "bench --proto fast", argv=bench("--proto", "fast"), expect="NCCL_PROTO 'fast'"),
    # simrun validate
    Case("validate-missing", "validate of a file that does not exist",
         argv=lambda d: ["validate", str(d / "nope.txt"), "--topo", "fat_tree"], expect="does not exist"),
    Case("validate-empty", "validate of an empty file",
         argv=lambda d: ["validate", str(written(d, "e.txt", b"")), "--topo", "fat_tree"], expect="e.txt: empty file"),
    Case("validate-garbage", "validate of a table without its operation",
         argv=lambda d: ["validate", str(written(d, "g.txt", b"# nThread 1 nGpus 8\n#  size count type\n  abc def\n")),
                         "--topo", "fat_tree"], expect="g.txt:2: nccl-tests table without its operation"),
    Case("validate-binary", "validate of a binary file",
         argv=lambda d: ["validate", str(evil_pickle(d)), "--topo", "fat_tree"], expect="binary data, not a trace",
         check=check_not_run),
    Case("validate-topo", "validate on an unknown fabric",
         argv=lambda d: ["validate", str(NCCL_TESTS), "--topo", "bogus"], expect="unknown topology 'bogus'"),
    # simrun compare
    Case("compare-bogus-fabric", "compare with an unknown fabric",
         argv=lambda d: ["compare", "--trace", str(small_trace(d)), "--topo", "fat_tree,bogus", "--serial", "-o",
                         str(d / "c")], expect="unknown topology 'bogus'"),
    Case("compare-no-fabric", "compare --topo ','",
         argv=lambda d: ["compare", "--trace", str(small_trace(d)), "--topo", ",", "-o", str(d / "c")],
         expect="needs at least one fabric"),
    # --model, --timing
    Case("model-bogus", "--model bogus", argv=run_args(small_trace, "--model", "bogus"), expect="'--model'"),
    Case("timing-bogus", "--timing bogus", argv=run_args(small_trace, "--timing", "bogus"), expect="'--timing'"),
    Case("model-analytical-window", "--model analytical with a time-windowed failure (no time line to apply it)",
         argv=run_args(small_trace, "--model", "analytical", "--fail-links", "1@0-1ms"), expect="need the flow tier"),
    # time-windowed failures and flaps
    Case("window-reversed", "--fail-links 1@2-1", argv=run_args(small_trace, "--fail-links", "1@2-1"),
         expect="ends before it starts"),
    Case("window-negative", "--fail-links 1@-1-2", argv=run_args(small_trace, "--fail-links", "1@-1-2"),
         expect="is not T1-T2, T1 or T1-T2/PERIOD"),
    Case("window-text", "--fail-links 1@x-y", argv=run_args(small_trace, "--fail-links", "1@x-y"),
         expect="is not T1-T2, T1 or T1-T2/PERIOD"),
    Case("window-inf", "--fail-links 1@0-inf", argv=run_args(small_trace, "--fail-links", "1@0-inf"),
         expect="is not T1-T2, T1 or T1-T2/PERIOD"),
    Case("flap-zero", "--fail-links 1@0-1/0", argv=run_args(small_trace, "--fail-links", "1@0-1/0"),
         expect="a flapping period needs T2 and must be > 0"),
    Case("flap-tiny", "--fail-links 1@0-1000/1e-12 (10**15 flaps: hung before the fix)", tags=("fresh",),
         argv=run_args(small_trace, "--fail-links", "1@0-1000/1e-12"), expect="more than the limit of 100,000"),
    Case("fail-too-many", "--fail-links 1000000", argv=run_args(small_trace, "--fail-links", "1000000"),
         expect="cannot choose 1000000 of the"),
    Case("fail-named-bogus", "--fail-links a-b (no such cable)", argv=run_args(small_trace, "--fail-links", "a-b"),
         expect="link 'a-b' is not a cable"),
    Case("degrade-zero", "--degrade-links 1:0", argv=run_args(small_trace, "--degrade-links", "1:0"),
         expect="must be a finite number > 0"),
    Case("degrade-nan", "--degrade-links 1:nan", argv=run_args(small_trace, "--degrade-links", "1:nan"),
         expect="must be a finite number > 0"),
    Case("degrade-window-reversed", "--degrade-links 1:0.5@3-1", argv=run_args(small_trace, "--degrade-links", "1:0.5@3-1"),
         expect="ends before it starts"),
    # hardware presets
    Case("set-gpu", "--set gpu=b9000", argv=run_args(small_trace, "--set", "gpu=b9000"),
         expect="parameter 'gpu' must be one of"),
    Case("set-nic", "--set nic=carrier-pigeon", argv=run_args(small_trace, "--set", "nic=carrier-pigeon"),
         expect="parameter 'nic' must be one of"),
    Case("set-gpu-int", "--set gpu=123", argv=run_args(small_trace, "--set", "gpu=123"),
         expect="parameter 'gpu' must be one of"),
    # compressed inputs
    Case("gz-truncated", "ingest of a gzip file cut short",
         argv=lambda d: ["ingest", str(written(d, "t.log.gz", gzip.compress(NCCL_LOG.read_bytes())[:200])), "-o",
                         str(d / "i.parquet")], expect="t.log.gz: cannot read"),
    Case("gz-not-gzip", "ingest of a .gz file that is plain text",
         argv=lambda d: ["ingest", str(written(d, "n.log.gz", b"this is not gzip\n")), "-o", str(d / "i.parquet")],
         expect="cannot tell the trace format"),
    Case("zst-corrupt", "ingest of a corrupt .zst file",
         argv=lambda d: ["ingest", str(written(d, "c.log.zst", b"\x28\xb5\x2f\xfd garbage")), "-o", str(d / "i.parquet")],
         expect="c.log.zst: cannot read"),
    Case("compressed-same", "gzip and zstd copies of a log ingest exactly as the plain file",
         call=lambda d: (lambda: check_compressed_same(d, None))),
    # Flight Recorder pickles carrying objects
    Case("fr-pickle-code", "a Flight Recorder pickle whose entry runs a command when unpickled",
         argv=lambda d: ["ingest", str(evil_pickle(d)), "-o", str(d / "i.parquet")],
         expect="refusing to load posix.system", check=check_not_run),
    Case("fr-pickle-object", "a Flight Recorder pickle carrying a datetime object",
         argv=lambda d: ["ingest", str(object_pickle(d)), "--format", "flight_recorder", "-o", str(d / "i.parquet")],
         expect="refusing to load datetime.datetime"),
    # folders and globs
    Case("ingest-empty-folder", "ingest of an empty folder",
         argv=lambda d: ["ingest", str((d / "empty").mkdir() or d / "empty"), "-o", str(d / "i.parquet")],
         expect="folder holds no files"),
    Case("ingest-glob-none", "ingest of a pattern that matches nothing",
         argv=lambda d: ["ingest", str(d / "nothing*.log"), "-o", str(d / "i.parquet")],
         expect="no file matches this pattern"),
    Case("ingest-folder-readme", "ingest of a folder with a log and a README: README skipped and counted", code=0,
         argv=lambda d: ["ingest", str(mixed_folder(d)), "-o", str(d / "i.parquet")], check=check_skipped_counted),
]
