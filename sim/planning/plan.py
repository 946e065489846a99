"""A transfer plan (:class:`TransferPlan`) and its assembly from pipeline stages (:class:`Edges`).

A plan is a DAG of transfers. Transfer ``i`` moves ``bytes[i]`` from GPU ``src[i]`` to GPU ``dst[i]`` on
NCCL channel ``channel[i]``; it may start once every transfer in ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` has
finished, and then pays ``delay_s[i]`` of software latency before its bytes move. Transfers are listed
in a topological order (every dependency has a smaller index).

Legs
    NVLS makes the NVSwitch a party: a GPU writes into (or reads a reduction from) the switch, and the
    switch multicasts to every GPU. Such a transfer is one *leg*, on one NVLink link: ``leg[i] ==
    LEG_UP`` is GPU ``src[i]`` -> its server's NVSwitch, ``LEG_DOWN`` is the NVSwitch -> GPU ``dst[i]``;
    ``src[i] == dst[i]`` is that GPU for both, so a consumer that knows nothing of legs sees a local copy
    (no link; a lower bound of the traffic). ``LEG_PATH`` (and ``leg is None``) is an ordinary GPU-to-GPU
    transfer over its whole route.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LEG_DOWN", "LEG_PATH", "LEG_UP", "PIECES", "Edges", "TransferPlan", "assemble", "excl_cumsum"]

_I32 = np.int32
_I64 = np.int64
#: Leg codes of :attr:`TransferPlan.leg`.
LEG_PATH, LEG_UP, LEG_DOWN = 0, 1, 2


@dataclass(frozen=True, eq=False)
class TransferPlan:
    """Transfers of one collective and their dependencies (CSR), all numpy arrays of one length.

    Attributes
    ----------
    src, dst : ndarray of int32
        Global ranks (GPU slots).
    bytes : ndarray of float64
        Payload of each transfer (protocol overhead excluded).
    channel : ndarray of int32
        NCCL channel id (also the flow key the engine hashes for ECMP).
    delay_s : ndarray of float64
        Software latency paid once the dependencies are met.
    dep_ptr, dep_idx : ndarray of int64
        Transfer ``i`` starts when every ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]`` has finished.
    algo, proto : str
        ``ring`` / ``tree`` / ``direct`` and ``LL`` / ``LL128`` / ``Simple``.
    step, chunk : ndarray of int32
        Diagnostics: the algorithm step (ring step, chain hop, tree level) and the chunk of each transfer.
    leg : ndarray of int8, optional
        :data:`LEG_PATH`, :data:`LEG_UP` or :data:`LEG_DOWN` per transfer (``None``: all paths).
    stream_next : ndarray of bool, optional
        True where transfer ``i`` is the NVLink leg of a streamed PXN relay whose bytes go on through
        ``dst[i]`` as transfer ``i + 1`` while they arrive (:func:`sim.planning.pxn.apply_pxn`); a consumer
        may run the pair as one flow (:func:`sim.planning.pxn.merge_streamed`). ``None``: no such pair.
    rate_cap_bytes_per_s : ndarray of float64, optional
        The most bytes per second each transfer's connection moves (``inf``: no ceiling; ``None``: none
        has one): a p2p network send runs on a few NCCL channels, each progressed by one proxy
        (:mod:`sim.planning.p2p`). Wire bytes per second, like link capacities.
    """

    src: np.ndarray
    dst: np.ndarray
    bytes: np.ndarray
    channel: np.ndarray
    delay_s: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    algo: str
    proto: str
    step: np.ndarray | None = None
    chunk: np.ndarray | None = None
    leg: np.ndarray | None = None
    stream_next: np.ndarray | None = None
    rate_cap_bytes_per_s: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.src)

    @property
    def total_bytes(self) -> float:
        """Sum of the transfers' bytes."""
        return float(self.bytes.sum())

    @classmethod
    def empty(cls, algo: str, proto: str) -> TransferPlan:
        """A plan with no transfers (zero bytes, one rank)."""
        z32, z64 = np.zeros(0, _I32), np.zeros(0, _I64)
        return cls(src=z32, dst=z32.copy(), bytes=np.zeros(0), channel=z32.copy(), delay_s=np.zeros(0),
                   dep_ptr=np.zeros(1, _I64), dep_idx=z64, algo=algo, proto=proto, step=z32.copy(),
                   chunk=z32.copy())


# --- assembly: edges × chunks → a topologically ordered CSR plan --------------------------------------

@dataclass
class Edges:
    """Per-channel pipeline stages ("edges") before chunking.

    ``pred`` (CSR) lists the edges whose same chunk must have arrived; ``prev`` is the edge the same
    sender serves just before this one (its last chunk precedes this edge's chunk 0), or -1.
    """

    src: np.ndarray
    dst: np.ndarray
    channel: np.ndarray
    step: np.ndarray
    bytes: np.ndarray
    delay_s: np.ndarray
    pred_ptr: np.ndarray
    pred_idx: np.ndarray
    prev: np.ndarray
    pos: np.ndarray  # tie-break key (ring position)
    leg: np.ndarray | None = None  # LEG_* per edge (None: all paths)


def excl_cumsum(counts: np.ndarray) -> np.ndarray:
    """``[0, c0, c0 + c1, ...]``: CSR offsets of ``counts`` (int64).

    Examples
    --------
    >>> excl_cumsum(np.array([2, 0, 3])).tolist()
    [0, 2, 2, 5]
    """
    out = np.zeros(len(counts) + 1, dtype=_I64)
    np.cumsum(counts, out=out[1:])
    return out


def _segments(starts: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row r copies ``counts[r]`` items from ``starts[r]``: the row, source position and offset within
    the row of every copied item."""
    total = int(counts.sum())
    row = np.repeat(np.arange(len(counts), dtype=_I64), counts)
    k = np.arange(total, dtype=_I64) - np.repeat(excl_cumsum(counts)[:-1], counts)
    return row, starts[row] + k, k


#: The fewest pieces per edge of a long pipeline (:func:`assemble`): head, one body, tail.
PIECES = 3


def _pieces(nchunks: int, n_edges: int, step_major: bool, prev: np.ndarray,
            max_transfers: int | None) -> tuple[int, np.ndarray, np.ndarray]:
    """(pieces per edge, share of the edge's bytes per piece, chunk lag of each piece's predecessor wait)."""
    if (step_major or max_transfers is None or nchunks <= PIECES or nchunks * n_edges <= max_transfers
            or np.any(prev >= 0)):
        return nchunks, np.full(nchunks, 1.0 / nchunks), np.zeros(nchunks, dtype=_I64)
    count = int(min(nchunks - 1, max(PIECES, max_transfers // max(n_edges, 1))))
    body = count - 2
    share = np.concatenate([[1.0], np.full(body, (nchunks - 2.0) / body), [1.0]]) / nchunks
    lag = np.concatenate([[0], np.ones(body, dtype=_I64), [0]]).astype(_I64)
    return count, share, lag


def assemble(e: Edges, nchunks: int, step_major: bool, base_delay_s: float, algo: str,
             proto: str, max_transfers: int | None = None) -> TransferPlan:
    """The plan of ``nchunks`` chunks of every edge, in topological order.

    Transfer (edge, chunk) waits for the same chunk of every predecessor edge and for its own previous
    chunk (chunk 0: the last chunk of ``prev``). ``step_major`` orders rings (step, chunk, channel,
    position); otherwise chunk, step, channel (trees, chains, NVLS, PAT: a predecessor has a smaller step).
    Chunk 0 of an edge pays the edge's delay; a transfer with no dependency also pays ``base_delay_s``.

    A pipelined plan (not ``step_major``, no ``prev`` chains) whose ``nchunks`` chunks per edge would
    exceed ``max_transfers`` gets ``P = max(3, max_transfers // edges)`` pieces per edge instead: a
    *head* of one chunk, ``K = P - 2`` *body* pieces sharing ``nchunks - 2`` chunks, and a *tail* of one
    chunk. The head waits for the predecessors' heads; body piece ``k`` for its own piece ``k - 1`` and
    the predecessors' piece ``k - 1`` (one piece of lag, so a body streams beside its upstream one but
    never more than one piece ahead); the tail for its last body piece and the predecessors' tails. On
    uncontended links the longest path equals the ``nchunks``-chunk pipeline's exactly: for every path
    of edges, ``sum(delays up to k) + sum(u / B_e) + (S - u) / B_k`` maximised over the edge ``k`` where
    it waits (``u = S / nchunks``; moving down a stage through the lag costs no extra piece), which is
    the proportionate flow shop's makespan chunk by chunk (``docs/collectives.md``, "Long pipelines").
    Under contention a body may run up to one piece (``S / nchunks x (nchunks - 2) / K``) ahead of its
    upstream edge.

    Examples
    --------
    >>> import numpy as np
    >>> z = np.zeros(2, np.int64)
    >>> chain = Edges(src=np.array([0, 1]), dst=np.array([1, 2]), channel=z, step=np.array([0, 1]),
    ...               bytes=np.array([100.0, 100.0]), delay_s=np.zeros(2), pred_ptr=np.array([0, 0, 1]),
    ...               pred_idx=np.array([0]), prev=np.full(2, -1), pos=np.arange(2))
    >>> p = assemble(chain, 10, False, 0.0, "ring", "Simple", max_transfers=8)
    >>> p.bytes.tolist()[::2], p.chunk.tolist()[::2]
    ([10.0, 40.0, 40.0, 10.0], [0, 1, 2, 3])
    """
    n_edges = len(e.src)
    c_n, share, lag = _pieces(nchunks, n_edges, step_major, e.prev, max_transfers)
    t_e = np.repeat(np.arange(n_edges, dtype=_I64), c_n)
    t_c = np.tile(np.arange(c_n, dtype=_I64), n_edges)
    n_t = len(t_e)
    npred = np.diff(e.pred_ptr)[t_e]
    chain = (t_c > 0) | (e.prev[t_e] >= 0)
    cnt = npred + chain
    ptr = excl_cumsum(cnt)
    dep = np.empty(int(ptr[-1]), dtype=_I64)
    # transfer (edge, chunk) = edge * C + chunk: first its predecessors' same chunk, then its own chain
    row, src_pos, k = _segments(e.pred_ptr[t_e], npred)
    dep[ptr[row] + k] = e.pred_idx[src_pos] * c_n + t_c[row] - lag[t_c[row]]
    rows = np.flatnonzero(chain)
    own_prev = np.where(t_c[rows] > 0, rows - 1, e.prev[t_e[rows]] * c_n + (c_n - 1))
    dep[ptr[rows] + npred[rows]] = own_prev

    ch_t, step_t = e.channel[t_e], e.step[t_e]
    if step_major:  # ring: step, then chunk, channel, position
        order = np.lexsort((e.pos[t_e], ch_t, t_c, step_t))
    else:           # chains and trees: chunk, then step (upstream first), channel
        order = np.lexsort((e.pos[t_e], ch_t, step_t, t_c))
    new_id = np.empty(n_t, dtype=_I64)
    new_id[order] = np.arange(n_t, dtype=_I64)
    cnt_new = cnt[order]
    ptr_new = excl_cumsum(cnt_new)
    row_new, old_pos, _ = _segments(ptr[order], cnt_new)
    dep_new = new_id[dep[old_pos]]
    if np.any(dep_new >= row_new):  # a construction bug, never bad input
        raise RuntimeError("collective plan is not in topological order")

    te, tc = t_e[order], t_c[order]
    delay = np.where(tc == 0, e.delay_s[te], 0.0) + np.where(cnt_new == 0, base_delay_s, 0.0)
    return TransferPlan(src=e.src[te].astype(_I32), dst=e.dst[te].astype(_I32),
                        bytes=(e.bytes[te] * share[tc]).astype(np.float64), channel=e.channel[te].astype(_I32),
                        delay_s=delay, dep_ptr=ptr_new, dep_idx=dep_new, algo=algo, proto=proto,
                        step=e.step[te].astype(_I32), chunk=tc.astype(_I32),
                        leg=None if e.leg is None else e.leg[te].astype(np.int8))
