"""From mapped COLL lines to trace rows: Send/Recv groups, AllToAll folding, ``seq``, TUNING.

Input is one row per usable COLL line with its communicator already resolved, all integer columns (``pos``,
``inst``, ``rank``, ``comm`` (a code), ``op`` (a code into :data:`OP_NAMES`), ``kind``, ``opc``, ``count``,
``dt``, ``size``, ``root``, ``nranks``, ``ts_us``): text is only built for the final rows. All steps are
vectorised with numpy (no pandas: ``simrun ingest`` never imports it) except the per-group tuple of
``split_bytes`` and the TUNING walk over the (few) processes that print TUNING lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from traces.arrays import factorize
from traces.lazy import lazy_module
from traces.schema import ROOTED_OPS

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: ``kind`` column: what ``seq`` counts (collectives per comm; Sends / Recvs per peer).
COLL, SEND, RECV = 0, 1, 2

#: Schema op names; build_rows takes ``op`` as a code into this table (integers sort and group fast).
OP_NAMES = np.array(["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "Send", "Recv", "AllToAll",
                     "Gather", "Scatter"], dtype=object)
OP_CODE = {name: k for k, name in enumerate(OP_NAMES)}
_ROOTED_CODES = [OP_CODE[name] for name in ROOTED_OPS if name in OP_CODE]

#: How many earlier collectives of a process a TUNING line may reach back over.
TUNING_WINDOW = 256


def object_frame(columns: dict[str, Any]) -> pd.DataFrame:
    """A DataFrame whose text columns stay ``object`` (pandas 3 would make them Arrow strings, which are
    slow to build, take and iterate in the row-wise steps here)."""
    return pd.DataFrame({k: pd.Series(v, dtype=getattr(v, "dtype", None) or object, copy=False)
                         for k, v in columns.items()}, copy=False)  # no copy: the caller drops its columns


Columns = dict[str, np.ndarray]


def _runs(cols: Columns) -> tuple[np.ndarray, np.ndarray]:
    """Run id of each row and a mask of rows in a Send/Recv group (>= 2 consecutive lines, one opCount)."""
    p2p = cols["kind"] > 0
    inst, opc = cols["inst"], cols["opc"]
    same = np.zeros(len(p2p), dtype=bool)
    same[1:] = (inst[1:] == inst[:-1]) & (opc[1:] == opc[:-1]) & p2p[1:] & p2p[:-1]
    run = np.cumsum(~same) - 1
    length = np.bincount(run) if len(run) else np.zeros(0, dtype=np.int64)
    return run, p2p & (length[run] >= 2) if len(run) else np.zeros(0, dtype=bool)


def _foldable(g: Columns) -> np.ndarray:
    """Per run id in ``g``: True when its Sends reach every comm rank once and its Recvs come from each once."""
    run = g["run"]
    size = int(run.max()) + 1
    kind, root, nranks = g["kind"], g["root"], g["nranks"]
    is_send = kind == SEND
    n = np.zeros(size, dtype=np.int64)
    n[run] = nranks
    bad = np.bincount(run, weights=(root < 0) | (root >= nranks), minlength=size) > 0
    n_send = np.bincount(run, weights=is_send, minlength=size)
    n_recv = np.bincount(run, weights=~is_send, minlength=size)
    first, first_run = _distinct_rows(run, kind, root)
    u_send = np.bincount(first_run, weights=kind[first] == SEND, minlength=size)
    u_recv = np.bincount(first_run, weights=kind[first] == RECV, minlength=size)
    n_dtype = np.bincount(_distinct_rows(run, g["dt"])[1], minlength=size)
    return (~bad & (n_send == n) & (n_recv == n) & (u_send == n) & (u_recv == n) & (n_dtype == 1)
            & (n > 0))


def _distinct_rows(*keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of one row per distinct key tuple, and the first key's value there (keys: equal-length arrays)."""
    order = np.lexsort(keys[::-1])
    change = np.zeros(len(order), dtype=bool)
    change[:1] = True
    for k in keys:
        v = k[order]
        change[1:] |= v[1:] != v[:-1]
    first = order[change]
    return first, keys[0][first]


def _cumcount(*keys: np.ndarray) -> np.ndarray:
    """Position of each row among the earlier rows with the same key tuple (pandas ``cumcount``)."""
    n = len(keys[0])
    order = np.lexsort((np.arange(n), *keys[::-1]))
    change = np.zeros(n, dtype=bool)
    change[:1] = True
    for k in keys:
        v = k[order]
        change[1:] |= v[1:] != v[:-1]
    start = np.maximum.accumulate(np.where(change, np.arange(n), 0))
    out = np.empty(n, dtype=np.int64)
    out[order] = np.arange(n) - start
    return out


def build_rows(lines: pd.DataFrame | Columns, frame: bool = True) -> pd.DataFrame | Columns:
    """Group, fold and number mapped COLL lines into trace rows (plus ``pos``, ``ts_us``, ``inst``, ``kind``).

    ``op`` comes back as names, ``comm`` stays the caller's code. The steps run on numpy columns (frames of
    ~500k rows cost a copy per filter) and build one frame at the end (``frame=False``: the columns, for a
    caller that joins the rows of several calls).
    """
    order = np.lexsort((np.asarray(lines["pos"]), np.asarray(lines["inst"])))
    cols: Columns = {k: np.asarray(lines[k])[order] for k in lines}
    run, grouped = _runs(cols)
    del cols["opc"]  # only the runs need it
    cols["run"] = run
    cols["group"] = np.full(len(run), -1, dtype=np.int64)
    cols["fold"] = np.full(len(run), -1, dtype=np.int64)  # index into the folded groups' split_bytes
    cols["bytes"] = cols["count"] * cols["size"]
    parts = [np.flatnonzero(~grouped)]  # row indices of the plain rows, then the kept group rows
    splits: list[tuple[int, ...]] = []
    folded: Columns = {}
    gi = np.flatnonzero(grouped)
    if len(gi):
        g = {k: v[gi] for k, v in cols.items()}
        to_fold = _foldable(g)[g["run"]]
        folded, splits = _fold({k: v[to_fold] for k, v in g.items()})
        kept = gi[~to_fold]
        if len(kept):
            # group ids count per rank in order of each group's first line
            first, first_run = _distinct_rows(run[kept])  # one row per run: its first (lines are in order)
            heads = kept[first]
            by = np.lexsort((cols["pos"][heads], cols["rank"][heads]))
            gid = np.empty(len(heads), dtype=np.int64)
            gid[by] = _cumcount(cols["rank"][heads][by])
            cols["group"][kept] = gid[np.searchsorted(first_run, run[kept])]  # first_run is ascending
        parts.append(kept)
    take = np.concatenate(parts)
    out = {k: v[take] for k, v in cols.items()}
    if folded:
        out = {k: np.concatenate([out[k], folded[k]]) for k in out}
    order = np.lexsort((out["pos"], out["rank"]))  # stable: ties keep plain, kept, folded order
    out = {k: v[order] for k, v in out.items()}
    kind = out["kind"]
    is_p2p = kind > 0
    rooted = np.isin(out["op"], _ROOTED_CODES)
    out["root"] = np.where(~rooted & ~is_p2p, -1, out["root"])
    peer = np.where(is_p2p, out["root"], -1)
    out["seq"] = _cumcount(out["rank"], out["comm"], kind, peer)
    out["op"] = OP_NAMES[out["op"].astype(np.int64)]
    # fromiter keeps each tuple as one object (np.array would unpack them into a 2-D array)
    table = np.fromiter([(), *splits], dtype=object, count=len(splits) + 1)
    out["split_bytes"] = table[out["fold"] + 1]
    del out["run"], out["fold"]
    return object_frame(out) if frame else out


def _fold(g: Columns) -> tuple[Columns, list[tuple[int, ...]]]:
    """One AllToAll row per folded Send/Recv group (``fold`` indexes the returned ``split_bytes`` list: bytes
    sent to each peer in peer order). Rows come in ascending ``run`` order."""
    run = g["run"]
    if not len(run):
        return {}, []
    sends = np.flatnonzero(g["kind"] == SEND)
    sends = sends[np.lexsort((g["root"][sends], run[sends]))]  # by run, then peer
    s_run = run[sends]
    starts = np.flatnonzero(np.r_[True, s_run[1:] != s_run[:-1]])
    bounds = [*starts.tolist(), len(sends)]
    sent = g["bytes"][sends].tolist()  # slices of one list: no array per group
    splits = list(map(tuple, map(sent.__getitem__, map(slice, bounds[:-1], bounds[1:]))))  # C loops, no frame
    total = np.add.reduceat(g["count"][sends], starts)
    by_pos = np.lexsort((g["pos"], run))  # each run's first line heads the folded row
    r = run[by_pos]
    head = by_pos[np.r_[True, r[1:] != r[:-1]]]  # ascending run, as the splits
    out = {k: v[head] for k, v in g.items()}
    out["op"] = np.full(len(head), OP_CODE["AllToAll"], dtype=out["op"].dtype)
    out["kind"] = np.full(len(head), COLL, dtype=out["kind"].dtype)
    out["count"] = total // out["nranks"]
    out["bytes"] = out["count"] * out["size"]
    out["root"] = np.full(len(head), -1, dtype=np.int64)
    out["group"] = np.full(len(head), -1, dtype=np.int64)
    out["fold"] = np.arange(len(splits), dtype=np.int64)
    return out, splits


def apply_tuning(rows: Columns, process: np.ndarray, tunings: dict[str, np.ndarray]) -> int:
    """Set ``algo``/``proto`` of ``rows`` (columns, in place) from TUNING lines; return how many TUNING lines
    matched no COLL line.

    ``tunings`` holds equal-length columns ``pos``, ``proc`` (process code as in ``process``), ``op``
    (printed name or None), ``nbytes``, ``algo``, ``proto``. :func:`match_tuning`, then
    :func:`copy_tuning` over all rows.
    """
    n_rows = len(rows["pos"])
    if not len(tunings["pos"]) or not n_rows:
        rows["algo"] = np.full(n_rows, "", dtype=object)
        rows["proto"] = np.full(n_rows, "", dtype=object)
        return len(tunings["pos"])
    algo, proto, unmatched = match_tuning(rows, process, tunings)
    copy_tuning(rows["kind"] == COLL, factorize(rows["comm"])[0], rows["seq"], algo, proto)
    rows["algo"], rows["proto"] = algo, proto
    return unmatched


def match_tuning(rows: Any, process: np.ndarray, tunings: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray, int]:
    """``algo``/``proto`` (object arrays, "" when unknown) of each row from the TUNING lines of its process,
    and how many TUNING lines matched no COLL line.

    ``rows`` has columns ``split_bytes``, ``kind``, ``pos``, ``op`` (names), ``bytes``, ``nranks``. A TUNING
    line is printed when the op is launched, after its COLL line, by the same process: it goes to the latest
    earlier collective of that process (within ``TUNING_WINDOW`` lines) not yet matched whose op (when
    printed) and size agree (``nBytes`` is count x size, times nranks for AllGather/ReduceScatter).
    Grouped launches print COLL a, COLL b, TUNING a, TUNING b: op and size tell a from b; identical ops are
    interchangeable. Processes are independent: matching one process at a time gives the same choices.
    """
    n_rows = len(rows["pos"])
    algo = np.full(n_rows, "", dtype=object)
    proto = np.full(n_rows, "", dtype=object)
    if not len(tunings["pos"]) or not n_rows:
        return algo, proto, len(tunings["pos"])
    splits = np.asarray(rows["split_bytes"])
    no_split = np.fromiter(map(len, splits), dtype=np.int64, count=n_rows) == 0
    cand = (np.asarray(rows["kind"]) == COLL) & no_split
    cand_idx = np.flatnonzero(cand)
    pos = np.asarray(rows["pos"])
    order = np.lexsort((pos[cand_idx], process[cand_idx]))
    cand_idx = cand_idx[order]
    cuts = np.flatnonzero(np.diff(process[cand_idx])) + 1
    by_proc = {int(process[part[0]]): part for part in np.split(cand_idx, cuts) if len(part)}
    ops, nbytes = np.asarray(rows["op"]), np.asarray(rows["bytes"])
    scaled = nbytes * np.where(np.isin(ops, ["AllGather", "ReduceScatter"]), np.asarray(rows["nranks"]), 1)
    unmatched = 0
    t_order = np.lexsort((tunings["pos"], tunings["proc"]))
    t_proc = tunings["proc"][t_order]
    t_cuts = np.flatnonzero(np.diff(t_proc)) + 1
    taken = np.zeros(n_rows, dtype=bool)
    for part in np.split(t_order, t_cuts):
        proc = int(tunings["proc"][part[0]])
        idx = by_proc.get(proc, np.empty(0, dtype=np.int64))
        idx_pos = pos[idx] if len(idx) else np.empty(0, dtype=np.int64)
        t_pos = tunings["pos"][part]
        t_op = tunings["op"][part]
        t_bytes = tunings["nbytes"][part]
        t_algo, t_proto = tunings["algo"][part], tunings["proto"][part]
        # Common case, vectorised: the TUNING line matches the collective just before it.
        near = np.searchsorted(idx_pos, t_pos) - 1
        cand = idx[np.maximum(near, 0)] if len(idx) else np.zeros(len(part), dtype=np.int64)
        hit = near >= 0
        if len(idx):
            hit &= ((t_op == None) | (t_op == ops[cand])) & ((t_bytes == nbytes[cand]) | (t_bytes == scaled[cand]))  # noqa: E711
        hits = np.flatnonzero(hit)
        direct = np.zeros(len(part), dtype=bool)
        direct[hits[np.unique(cand[hits], return_index=True)[1]]] = True  # one TUNING line per collective
        taken[cand[direct]] = True
        algo[cand[direct]] = t_algo[direct]
        proto[cand[direct]] = t_proto[direct]
        for j in np.flatnonzero(~direct).tolist():  # the rest: walk back over unmatched collectives
            found = None
            k = int(near[j])
            op_j, bytes_j = t_op[j], int(t_bytes[j])
            for i in idx[max(k - TUNING_WINDOW, -1) + 1: k + 1][::-1]:
                if not taken[i] and (op_j is None or op_j == ops[i]) and bytes_j in (nbytes[i], scaled[i]):
                    found = i
                    break
            if found is None:
                unmatched += 1
                continue
            taken[found] = True
            algo[found], proto[found] = t_algo[j], t_proto[j]
    return algo, proto, unmatched


def copy_tuning(coll: np.ndarray, comm: np.ndarray, seq: np.ndarray, algo: np.ndarray, proto: np.ndarray,
                unknown: Any = "") -> None:
    """Copy each choice to the other ranks' rows of the same (comm, seq) collective (every rank runs the same
    algorithm): from the first row of the collective, in row order, that has one. In place; ``comm`` as
    integer codes; ``unknown`` is the value of ``algo`` when not known (text or a code)."""
    key = comm * (int(seq.max()) + 1) + seq
    known = np.flatnonzero(coll & (algo != unknown))
    if len(known):
        known_key, first = np.unique(key[known], return_index=True)  # the first row per key, as before
        src = known[first]
        fill = np.flatnonzero(coll & (algo == unknown))
        at = np.minimum(np.searchsorted(known_key, key[fill]), len(known_key) - 1)
        hit = known_key[at] == key[fill]
        algo[fill[hit]] = algo[src[at[hit]]]
        proto[fill[hit]] = proto[src[at[hit]]]


__all__ = ["COLL", "OP_CODE", "OP_NAMES", "RECV", "SEND", "TUNING_WINDOW", "apply_tuning", "build_rows",
    "copy_tuning", "match_tuning", "object_frame"]
