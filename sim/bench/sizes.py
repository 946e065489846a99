"""nccl-tests' vocabulary: operation and datatype names, size strings, the size sweep and per-op counts.

Pure functions shared by the virtual benchmark (``sim.bench.run``) and the nccl-tests reader
(``traces.formats.nccl_tests``), so both speak exactly as ``*_perf`` does.

References
----------
NVIDIA/nccl-tests ``src/common.cu`` (size parsing, ``-b/-e/-f/-i``), ``src/*.cu`` (per-op counts),
``doc/PERFORMANCE.md`` (algbw, busbw).
"""

from __future__ import annotations

import math
import re

from sim.errors import SimError
from traces.formats.nccl_tests import NCCLTESTS_DTYPES, NCCLTESTS_OPS, op_counts

__all__ = [
    "BENCH_OPS",
    "HOST_LAUNCH_US_PER_GPU",
    "NCCLTESTS_DTYPES",
    "bench_sizes",
    "gpus_per_thread",
    "host_floor_s",
    "op_counts",
    "parse_size",
    "redop_of",
    "trace_op",
]

#: nccl-tests binary stem -> SPEC §3 op, and ``type`` names -> SPEC §3 dtype (shared with the reader).
BENCH_OPS = NCCLTESTS_OPS
#: Host time one nccl-tests thread spends per iteration and GPU it drives (us): ``ncclGroupEnd`` launches
#: the kernels of all its GPUs one after the other (NVIDIA/nccl#347). Measured by nccl-tests' own timer on
#: a DGX-A100 with ``-g N`` (NVIDIA/nccl-tests#123: ring/LL, one channel, 8-128 B): 10.0, 13.8, 16.9,
#: 20.8, 25.2, 29.5, 33.7 us for N = 2..8, i.e. 4.2 us x N from N = 4 on (5.0, 4.6 at N = 2, 3). Not from
#: any table of the validation suite.
HOST_LAUNCH_US_PER_GPU = 4.2
_NGPUS_RE = re.compile(r"nThread\s+(\d+)\s+nGpus\s+(\d+)")
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B)?\s*$", re.IGNORECASE)


def parse_size(text: str | int) -> int:
    """A size as nccl-tests reads it: a number with an optional K/M/G/T suffix (powers of 1024).

    Raises
    ------
    SimError
        Text that is not a size.

    Examples
    --------
    >>> parse_size("16G"), parse_size("8"), parse_size("1M")
    (17179869184, 8, 1048576)
    >>> parse_size("-8")
    Traceback (most recent call last):
    ...
    sim.errors.SimError: size '-8' must be >= 0
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
        if not m and _SIZE_RE.match(str(text).strip().removeprefix("-")):  # a size, but negative
            raise SimError(f"size {text!r} must be >= 0")
        if not m:
            raise SimError(f"size {text!r} is not a number with an optional K, M, G or T suffix")
        value = int(float(m.group(1)) * _SUFFIX[m.group(2).upper()])
    if value < 0:
        raise SimError(f"size {text!r} must be >= 0")
    return value


def bench_sizes(min_bytes: int, max_bytes: int, factor: float = 2.0, step_bytes: int | None = None) -> list[int]:
    """The sizes ``*_perf -b MIN -e MAX -f FACTOR`` (or ``-i STEP``) sweeps, both ends included.

    Raises
    ------
    SimError
        ``MIN > MAX``, a factor <= 1 or a step <= 0.

    Examples
    --------
    >>> bench_sizes(8, 64)
    [8, 16, 32, 64]
    >>> bench_sizes(100, 400, step_bytes=150)
    [100, 250, 400]
    """
    if min_bytes > max_bytes:
        raise SimError(f"minimum size {min_bytes} exceeds maximum size {max_bytes}")
    out = []
    size = int(min_bytes)
    if step_bytes is not None:
        if step_bytes <= 0:
            raise SimError(f"step {step_bytes} must be > 0")
        _check_rows((max_bytes - size) // int(step_bytes) + 1)
        while size <= max_bytes:
            out.append(size)
            size += int(step_bytes)
        return out
    if not 1 < factor < math.inf:  # inf overflowed int(); NaN compares False
        raise SimError(f"factor {factor} must be > 1 and finite")
    if size == 0:
        return [0]
    _check_rows(math.log(max(max_bytes, size) / size) / math.log(factor) + 1)
    while size <= max_bytes:
        out.append(size)
        size = int(size * factor)
    return out


#: Most rows one bench sweeps (nccl-tests tables have ~30; `-b 1 -e 1G -i 1` asked for 10**9 and hung).
MAX_BENCH_ROWS = 10_000


def _check_rows(rows: float) -> None:
    if rows > MAX_BENCH_ROWS:
        raise SimError(f"these sizes make {rows:,.0f} rows, more than the limit of {MAX_BENCH_ROWS:,} "
                       "(use a larger -i or -f)")


def trace_op(name: str) -> str:
    """SPEC §3 op of an nccl-tests binary stem (``all_reduce``, ``all_reduce_perf``, ``AllReduce``).

    Raises
    ------
    SimError
        An unknown name.

    Examples
    --------
    >>> trace_op("all_gather_perf"), trace_op("sendrecv")
    ('AllGather', 'Send')
    """
    key = str(name).strip().lower().removesuffix("_perf").removesuffix("_mpi")
    if key in BENCH_OPS:
        return BENCH_OPS[key]
    for stem, op in BENCH_OPS.items():
        if key == op.lower() or key == stem.replace("_", ""):
            return op
    raise SimError(f"operation {name!r} is not one of: {', '.join(BENCH_OPS)}")


def redop_of(op: str) -> str:
    """The ``redop`` column nccl-tests prints: ``sum`` for reductions, ``none`` otherwise."""
    return "sum" if op in ("AllReduce", "ReduceScatter", "Reduce") else "none"


def host_floor_s(gpus_per_thread: int) -> float:
    """The shortest time per iteration nccl-tests can print when one thread drives ``gpus_per_thread`` GPUs.

    nccl-tests times ``iters`` collectives issued back to back without a sync (``BenchTime``,
    ``src/common.cu``) and divides the elapsed wall time by ``iters``; each iteration's ``ncclGroupEnd``
    launches one kernel per GPU of the thread, serially, at :data:`HOST_LAUNCH_US_PER_GPU` each. When the
    GPUs finish a collective faster than that, the host's launches set the time: ``max(GPU time, G x
    4.2 us)``. With one GPU per process (``-g 1``, MPI) the floor (4.2 us) is below every NCCL latency.

    Raises
    ------
    SimError
        ``gpus_per_thread < 1``.

    Examples
    --------
    >>> round(host_floor_s(8) * 1e6, 1), round(host_floor_s(1) * 1e6, 1)
    (33.6, 4.2)
    """
    if int(gpus_per_thread) < 1:
        raise SimError(f"GPUs per thread {gpus_per_thread} must be >= 1")
    return int(gpus_per_thread) * HOST_LAUNCH_US_PER_GPU * 1e-6


def gpus_per_thread(text: str, header_lines) -> list[int]:
    """GPUs each nccl-tests thread drove (``-g``) for the tables whose headers are at ``header_lines``.

    Read from the last ``# nThread T nGpus G`` line before each header (1-based line numbers, as the
    nccl-tests reader records them); 1 where the output has none (``-g 1`` is the default).

    Examples
    --------
    >>> txt = "\\n".join(["# nThread 1 nGpus 8 minBytes 8", "#  size", "# nThread 1 nGpus 1", "#  size"])
    >>> gpus_per_thread(txt, [2, 4, 1])
    [8, 1, 1]
    """
    marks = [(k, int(m.group(2))) for k, line in enumerate(text.splitlines(), 1) if (m := _NGPUS_RE.search(line))]
    out = []
    for line in header_lines:
        before = [g for k, g in marks if k < int(line)]
        out.append(before[-1] if before else 1)
    return out
