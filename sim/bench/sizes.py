"""nccl-tests' vocabulary: operation and datatype names, size strings, the size sweep and per-op counts.

Pure functions shared by the virtual benchmark (``sim.bench.run``) and the nccl-tests reader
(``traces.formats.nccl_tests``), so both speak exactly as ``*_perf`` does.

References
----------
NVIDIA/nccl-tests ``src/common.cu`` (size parsing, ``-b/-e/-f/-i``), ``src/*.cu`` (per-op counts),
``doc/PERFORMANCE.md`` (algbw, busbw).
"""

from __future__ import annotations

import re

from sim.errors import SimError
from traces.formats.nccl_tests import NCCLTESTS_DTYPES, NCCLTESTS_OPS, op_counts

__all__ = [
    "BENCH_OPS",
    "NCCLTESTS_DTYPES",
    "bench_sizes",
    "op_counts",
    "parse_size",
    "redop_of",
    "trace_op",
]

#: nccl-tests binary stem -> SPEC §3 op, and ``type`` names -> SPEC §3 dtype (shared with the reader).
BENCH_OPS = NCCLTESTS_OPS
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
    """
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        m = _SIZE_RE.match(str(text))
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
        while size <= max_bytes:
            out.append(size)
            size += int(step_bytes)
        return out
    if not factor > 1:
        raise SimError(f"factor {factor} must be > 1")
    if size == 0:
        return [0]
    while size <= max_bytes:
        out.append(size)
        size = int(size * factor)
    return out


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
