"""AllGather and ReduceScatter beyond the ring: PAT (one GPU per server) and NVLS (one server).

PAT (Parallel Aggregated Trees, NCCL 2.23 ``src/include/collectives.h``, ``prims_simple.h``)
    Every rank talks to the ranks at distances ``2^d``. AllGather sends to ``rank - 2^d``: from the
    largest distance down to 1, a rank forwards every block it holds whose destination still lacks it, so
    the block of rank ``r + s`` arrives once, over the lowest set bit of ``s``, and stage ``d`` carries
    ``ceil((n - 2^d) / 2^(d+1))`` blocks. ReduceScatter is the mirror image (distances from 1 up,
    ``rank + 2^d``, partial sums). A rank sends ``n - 1`` blocks in all, as on a ring, in
    ``ceil(log2 n)`` stages instead of ``n - 1`` steps.
NVLS AllGather / ReduceScatter (one server)
    AllGather: every GPU multicasts its block (GPU -> switch, then switch -> every GPU). ReduceScatter:
    the switch reads every GPU's copy of each slice (GPU -> switch) and returns each GPU its reduced
    slice (switch -> GPU).
"""

from __future__ import annotations

import math

import numpy as np

from sim.errors import SimError
from sim.planning import chunking, tuning
from sim.planning.nvls import nvls_chunks
from sim.planning.options import PlanOptions
from sim.planning.plan import LEG_DOWN, LEG_PATH, LEG_UP, Edges, TransferPlan, assemble, excl_cumsum

__all__ = ["nvls_gather_plan", "pat_block_counts", "pat_edges", "pat_plan"]

_I64 = np.int64


def pat_block_counts(n: int) -> np.ndarray:
    """Blocks a rank sends at each PAT stage ``d`` (distance ``2^d``), ``d = 0 .. ceil(log2 n) - 1``.

    Examples
    --------
    >>> pat_block_counts(8).tolist(), pat_block_counts(5).tolist()
    ([4, 2, 1], [2, 1, 1])
    >>> int(pat_block_counts(80).sum())
    79
    """
    if n < 2:
        raise SimError(f"PAT needs at least 2 ranks, got {n}")
    dims = math.ceil(math.log2(n))
    return np.array([-(-(n - (1 << d)) // (1 << (d + 1))) for d in range(dims)], dtype=_I64)


def pat_edges(op: str, ranks: np.ndarray, nchannels: int, block_bytes: float) -> Edges:
    """PAT stages of AllGather (distances high to low) or ReduceScatter (low to high), per channel.

    A stage's send from a rank waits for everything the rank received in the earlier stages.

    Examples
    --------
    >>> e = pat_edges("AllGather", np.arange(4), 1, 10.0)
    >>> e.src.tolist(), e.dst.tolist(), e.bytes.tolist()
    ([0, 1, 2, 3, 0, 1, 2, 3], [2, 3, 0, 1, 3, 0, 1, 2], [10.0, 10.0, 10.0, 10.0, 20.0, 20.0, 20.0, 20.0])
    """
    if op not in ("AllGather", "ReduceScatter"):
        raise SimError(f"PAT has no {op} (AllGather, ReduceScatter)")
    n = len(ranks)
    counts = pat_block_counts(n)
    dims = len(counts)
    stages = list(range(dims - 1, -1, -1)) if op == "AllGather" else list(range(dims))
    sign = -1 if op == "AllGather" else 1
    src, dst, chan, step, nbytes, preds = [], [], [], [], [], []
    for ch in range(nchannels):
        into: dict[int, list[int]] = {x: [] for x in range(n)}  # edges received so far, per rank
        for k, d in enumerate(stages):
            made = []
            for x in range(n):
                y = (x + sign * (1 << d)) % n
                made.append((len(src), y))
                src.append(ranks[x])
                dst.append(ranks[y])
                chan.append(ch)
                step.append(k)
                nbytes.append(float(counts[d]) * block_bytes)
                preds.append(list(into[x]))
            for e, y in made:
                into[y].append(e)
    m = len(src)
    return Edges(src=np.array(src, _I64), dst=np.array(dst, _I64), channel=np.array(chan, _I64),
                 step=np.array(step, _I64), bytes=np.array(nbytes), delay_s=np.zeros(m),
                 pred_ptr=excl_cumsum(np.array([len(p) for p in preds], _I64)),
                 pred_idx=np.array([x for p in preds for x in p], _I64), prev=np.full(m, -1, _I64),
                 pos=np.arange(m, dtype=_I64), leg=np.full(m, LEG_PATH, np.int8))


def _pat_chunk_bytes(op: str, nbytes_total: float, nchannels: int, buff_bytes: int) -> float:
    # enqueue.cc: one Simple step (NCCL_BUFFSIZE / 8: 512 KiB by default), halved down to 64 KiB while
    # chunk x channels x 32 (AllGather) or x 16 (ReduceScatter) exceeds the op's bytes
    chunk = chunking.chunk_unit_bytes("Simple", buff_bytes)
    mult = 32 if op == "AllGather" else 16
    while chunk * nchannels * mult > nbytes_total and chunk > 65536:
        chunk //= 2
    return float(chunk)


def pat_plan(op: str, ranks: np.ndarray, nbytes: float, model: tuning.CostModel, opts: PlanOptions) -> TransferPlan:
    """The PAT plan of an AllGather / ReduceScatter of ``nbytes`` per rank (one GPU per server)."""
    n = len(ranks)
    total = tuning.nccl_nbytes(op, nbytes, n)
    nch = int(opts.nchannels or tuning.channels_for(op, "ring", "Simple", nbytes, n, opts.max_channels))
    edges = pat_edges(op, ranks, nch, nbytes / nch)
    unit = opts.chunk_bytes or _pat_chunk_bytes(op, total, nch, model.simple_buff_bytes)
    nchunks = chunking.pipeline_chunks(nbytes / nch, unit)
    if opts.max_chunks is not None:
        nchunks = min(nchunks, opts.max_chunks)
    lat = tuning.algo_latency_s(op, "pat", "Simple", n, n, model, physical=True)
    return assemble(edges, max(1, nchunks), False, lat, "pat", "Simple", opts.max_pipeline_transfers)


def nvls_gather_plan(op: str, ranks: np.ndarray, groups: list[np.ndarray], nbytes: float,
                     model: tuning.CostModel, opts: PlanOptions) -> TransferPlan:
    """NVLS AllGather / ReduceScatter on one server (``nbytes``: per-rank block).

    Examples
    --------
    >>> p = nvls_gather_plan("AllGather", np.arange(4), [np.arange(4)], 1000.0, tuning.CostModel(), PlanOptions())
    >>> p.leg.tolist(), p.bytes.tolist()
    ([1, 1, 1, 1, 2, 2, 2, 2], [1000.0, 1000.0, 1000.0, 1000.0, 4000.0, 4000.0, 4000.0, 4000.0])
    """
    if op not in ("AllGather", "ReduceScatter") or len(groups) != 1:
        raise SimError(f"NVLS {op} is planned on one server only (AllGather, ReduceScatter)")
    n = len(ranks)
    up_bytes, down_bytes = (nbytes, n * nbytes) if op == "AllGather" else (n * nbytes, nbytes)
    up = np.arange(n, dtype=_I64)
    edges = Edges(src=np.concatenate([ranks, ranks]).astype(_I64), dst=np.concatenate([ranks, ranks]).astype(_I64),
                  channel=np.zeros(2 * n, _I64), step=np.repeat(np.array([0, 1], _I64), n),
                  bytes=np.repeat([float(up_bytes), float(down_bytes)], n), delay_s=np.zeros(2 * n),
                  pred_ptr=excl_cumsum(np.concatenate([np.zeros(n, _I64), np.full(n, n, _I64)])),
                  pred_idx=np.tile(up, n), prev=np.full(2 * n, -1, _I64), pos=np.arange(2 * n, dtype=_I64),
                  leg=np.repeat(np.array([LEG_UP, LEG_DOWN], np.int8), n))
    total = tuning.nccl_nbytes(op, nbytes, n)
    unit = opts.chunk_bytes or tuning.nvls_chunk_bytes("nvls", total, n, 1)
    nchunks = nvls_chunks(total, n, unit)
    if opts.max_chunks is not None:
        nchunks = min(nchunks, opts.max_chunks)
    lat = tuning.algo_latency_s(op, "nvls", "Simple", n, 1, model)
    return assemble(edges, max(1, nchunks), False, lat, "nvls", "Simple", opts.max_pipeline_transfers)
