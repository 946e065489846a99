"""Cases of session 22: real files first read then (tests/data), damaged as real files are.

A real NCCL log cut mid-line, two NCCL versions in one file, binary bytes inside a log, a TUNING-only log, a
COLL line with a rank tag after ``NCCL INFO``, RCCL's 2019 microsecond prefix with a hard-wrapped body, logs
six years apart in one ingest; Kineto and Execution Trace files cut short, a Kineto trace
without ``distributedInfo`` or without recorded shapes, an Execution Trace of a process that made no
collective call (alone and in a folder with another rank's), a folder mixing a good Kineto trace with a bad
one, an NCCL log and a Kineto trace in one call, and a Flight Recorder dump printed by Python (not JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd

from bad_inputs_cases.common import Case, Outcome

__all__ = ["CASES"]

ROOT = Path(__file__).resolve().parents[2]
LOGS = ROOT / "tests/data/nccl_logs"
SRUN = LOGS / "slinky_srun_4node_2_23.log"  # 9 COLL lines, the last one ends the file
OLD = LOGS / "issue147_torn_broadcast.log"  # 2018, no timestamps: 6 COLL bodies
NEW = LOGS / "deepep330_external_timestamps.log"  # 2025, outer timestamps: 6 COLL lines
TAGGED = LOGS / "issue1352_rank_tag_after_info.log"
TUNING = LOGS / "issue1453_tuning_only_mpirun.log"
RCCL = LOGS / "rtg_tracer_rccl_usec_timestamp_wrapped.log"  # 2019: microseconds after [dev], wrapped after 'comm'
KINETO = ROOT / "tests/data/traces/kineto"
K08 = KINETO / "08_hta_ns_resolution_1gpu_rank0_pg_id_collective_subset.json"
K12 = KINETO / "12_hta_no_record_shapes_rank1_first10_subset.json"
K13 = KINETO / "13_hta_no_distributed_info_collective_subset.json"
ET = ROOT / "tests/data/traces/pytorch_et_single_rank"  # beside pytorch_et/, which tests ingest as a folder
ET04 = ET / "04_param_resnet_1gpu_chakra_1.0.3_et_collective_subset.json"
ET05 = ET / "05_param_linear_et_no_collectives_first40.json"
FR = ROOT / "tests/data/flight_recorder/tutorial_printed_dump_rank_0"  # Python's print of a dump: no JSON


def put(d: Path, name: str, data: bytes) -> Path:
    (d / name).write_bytes(data)
    return d / name


def folder_of(*paths: Path, names: tuple[str, ...] = ()) -> Callable[[Path], Path]:
    def make(d: Path) -> Path:
        sub = d / "in"
        sub.mkdir(exist_ok=True)
        for i, p in enumerate(paths):
            put(sub, names[i] if i < len(names) and names[i] else p.name, p.read_bytes())
        return sub
    return make


def ingest(*inputs: Callable[[Path], Path], extra: tuple[str, ...] = ()) -> Callable[[Path], list[str]]:
    return lambda d: ["ingest", *[str(make(d)) for make in inputs], "-o", str(d / "t.parquet"), *extra]


def copy(path: Path, cut_bytes: int = 0, name: str = "") -> Callable[[Path], Path]:
    """The file as it is, or without its last ``cut_bytes`` bytes (a process killed mid-write)."""
    data = path.read_bytes()
    return lambda d: put(d, name or path.name, data[: len(data) - cut_bytes] if cut_bytes else data)


def rows_and_words(n_rows: int, *words: str, column: str = "", values: set | None = None
                   ) -> Callable[[Path, Outcome], str | None]:
    """The output has ``n_rows`` rows (counted in the input by hand), the summary says ``words``, and
    ``column`` holds only ``values`` when given."""
    def check(folder: Path, out: Outcome) -> str | None:
        df = pd.read_parquet(folder / "t.parquet")
        if len(df) != n_rows:
            return f"{len(df)} rows, expected {n_rows}"
        missing = [w for w in words if w not in out.stdout]
        if missing:
            return f"summary lacks {missing}: {out.stdout.strip()[-200:]!r}"
        if column and set(df[column]) != values:
            return f"{column} is {sorted(set(df[column]))}, expected {sorted(values or ())}"
        return None
    return check


def nul_inside(d: Path) -> Path:
    lines = SRUN.read_bytes().splitlines(keepends=True)
    return put(d, "nul.log", b"".join(lines[:5]) + b"\x00\x00\xff garbage\n" + b"".join(lines[5:]))


CASES: list[Case] = [
    # NCCL logs
    Case("real-nccl-cut-midline", "a real log cut 60 bytes before its end: the cut COLL line counted, 8 kept",
         code=0, argv=ingest(copy(SRUN, 60)), check=rows_and_words(8, "1 malformed COLL line")),
    Case("real-nccl-two-versions", "a 2018 log without timestamps and a 2025 one with them in one file",
         code=0, argv=ingest(lambda d: put(d, "mixed.log", OLD.read_bytes() + NEW.read_bytes())),
         check=rows_and_words(12, "nothing skipped")),
    Case("real-nccl-rank-tag", "COLL lines 'NCCL INFO [2] AllReduce: ...' keep their host (were host '')",
         code=0, argv=ingest(copy(TAGGED)), check=rows_and_words(3, column="host", values={"srv01"})),
    Case("real-nccl-rccl-wrapped", "RCCL 2019 '[1] <usec> NCCL INFO' prefix, the body wrapped without indent "
         "(was: 1 malformed line, no rows)", code=0, argv=ingest(copy(RCCL)),
         check=rows_and_words(1, "nothing skipped", column="host", values={"rocm-framework-3"})),
    Case("real-nccl-years-apart", "a 2019 log and a 2025 log in one ingest (6 years apart): refused naming them",
         expect="deepep330_external_timestamps.log: row 1: field 't_start_s' is more than 1e+06 s",
         argv=ingest(copy(RCCL), copy(NEW))),
    Case("real-nccl-nul-bytes", "NUL and 0xFF bytes inside a real log", expect="binary data",
         argv=ingest(nul_inside)),
    Case("real-nccl-tuning-only", "a log of TUNING lines only (no COLL subsystem)", expect="NCCL_DEBUG_SUBSYS=COLL",
         argv=ingest(copy(TUNING))),
    Case("real-nccl-and-kineto", "an NCCL log and a Kineto trace in one call", expect="mix",
         argv=ingest(copy(SRUN), copy(K08))),
    # Kineto
    Case("real-kineto-cut", "a real Kineto trace cut in half", expect="malformed JSON",
         argv=ingest(copy(K08, K08.stat().st_size // 2))),
    Case("real-kineto-no-shapes", "annotations without Input Dims (profiled without record_shapes)",
         expect="record_shapes=True", argv=ingest(copy(K12))),
    Case("real-kineto-no-rank", "a real Kineto trace without distributedInfo", expect="no 'distributedInfo.rank'",
         argv=ingest(copy(K13))),
    Case("real-kineto-folder-one-bad", "a folder with a good Kineto trace and one without a rank",
         expect="13_hta_no_distributed_info", argv=ingest(folder_of(K08, K13))),
    Case("real-kineto-pg-id", "Process Group ID without Process Group Name names the group (was pg:size1)",
         code=0, argv=ingest(copy(K08)), check=rows_and_words(35, column="comm", values={"pg:0"})),
    # Flight Recorder
    Case("real-fr-printed-dump", "a Flight Recorder dump as PyTorch's tutorial prints it (a tuple, '...')",
         expect="a '(' there is a Python tuple", argv=ingest(copy(FR))),
    # Execution Traces
    Case("real-et-cut", "a real Execution Trace cut in half", expect="malformed JSON",
         argv=ingest(copy(ET04, ET04.stat().st_size // 2))),
    # named without digits (as param names them): a rank cannot come from the name either
    Case("real-et-no-collectives", "an ET without collective calls (was: 'cannot tell the rank')",
         expect="no collective operations found", argv=ingest(copy(ET05, name="linear_et.json"))),
    Case("real-et-folder-no-collectives", "a folder with that ET beside a rank's with collectives (was refused)",
         code=0, argv=ingest(folder_of(ET04, ET05, names=("", "linear_et.json"))), check=rows_and_words(21)),
]
