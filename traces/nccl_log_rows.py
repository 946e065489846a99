"""From mapped COLL lines to trace rows: Send/Recv groups, AllToAll folding, ``seq``, TUNING.

Input is one row per usable COLL line with its communicator already resolved, all integer columns (``pos``,
``inst``, ``rank``, ``comm`` (a code), ``op`` (a code into :data:`OP_NAMES`), ``kind``, ``opc``, ``count``,
``dt``, ``size``, ``root``, ``nranks``, ``ts_us``): text is only built for the final rows. All steps are
vectorised with numpy/pandas except the per-group tuple of ``split_bytes`` and the TUNING walk over the
(few) processes that print TUNING lines.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from traces.schema import ROOTED_OPS

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
                         for k, v in columns.items()})


def _runs(df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """Run id of each row and a mask of rows in a Send/Recv group (>= 2 consecutive lines, one opCount)."""
    p2p = df["kind"].to_numpy() > 0
    inst = df["inst"].to_numpy()
    opc = df["opc"].to_numpy()
    same = np.zeros(len(df), dtype=bool)
    same[1:] = (inst[1:] == inst[:-1]) & (opc[1:] == opc[:-1]) & p2p[1:] & p2p[:-1]
    run = np.cumsum(~same) - 1
    length = np.bincount(run) if len(run) else np.zeros(0, dtype=np.int64)
    return run, p2p & (length[run] >= 2) if len(run) else np.zeros(0, dtype=bool)


def _foldable(g: pd.DataFrame) -> np.ndarray:
    """Per run id in ``g``: True when its Sends reach every comm rank once and its Recvs come from each once."""
    run = g["run"].to_numpy()
    size = int(run.max()) + 1
    is_send = g["kind"].to_numpy() == SEND
    root = g["root"].to_numpy()
    nranks = g["nranks"].to_numpy()
    n = np.zeros(size, dtype=np.int64)
    n[run] = nranks
    bad = np.bincount(run, weights=(root < 0) | (root >= nranks), minlength=size) > 0
    n_send = np.bincount(run, weights=is_send, minlength=size)
    n_recv = np.bincount(run, weights=~is_send, minlength=size)
    uniq = g.drop_duplicates(["run", "kind", "root"])
    u_send = np.bincount(uniq["run"], weights=uniq["kind"] == SEND, minlength=size)
    u_recv = np.bincount(uniq["run"], weights=uniq["kind"] == RECV, minlength=size)
    n_dtype = np.bincount(g.drop_duplicates(["run", "dt"])["run"], minlength=size)
    return (~bad & (n_send == n) & (n_recv == n) & (u_send == n) & (u_recv == n) & (n_dtype == 1)
            & (n > 0))


def build_rows(lines: pd.DataFrame) -> pd.DataFrame:
    """Group, fold and number mapped COLL lines into trace rows (plus ``pos``, ``ts_us``, ``inst``, ``kind``).

    ``op`` comes back as names, ``comm`` stays the caller's code.
    """
    df = lines.sort_values(["inst", "pos"], kind="stable").reset_index(drop=True)
    run, grouped = _runs(df)
    df = df.drop(columns=["opc"])  # only the runs need it: one column less to carry through the takes
    df["run"] = run
    df["group"] = -1
    df["fold"] = -1  # index into the folded groups' split_bytes (built once, for the final rows only)
    df["bytes"] = df["count"] * df["size"]
    plain = df[~grouped]
    g = df[grouped]
    folded = pd.DataFrame(columns=df.columns)
    splits: list[tuple[int, ...]] = []
    if len(g):
        fold = _foldable(g)
        to_fold = fold[g["run"].to_numpy()]
        folded, splits = _fold(g[to_fold])
        kept = g[~to_fold].copy()
        if len(kept):
            first = kept.groupby("run", sort=False).agg(rank=("rank", "first"), pos=("pos", "min"))
            first = first.sort_values(["rank", "pos"], kind="stable")
            first["gid"] = first.groupby("rank").cumcount()
            kept["group"] = kept["run"].map(first["gid"]).astype("int64")
        g = kept
    out = pd.concat([x for x in (plain, g, folded) if len(x)], ignore_index=True) if len(df) else df
    out = out.sort_values(["rank", "pos"], kind="stable").reset_index(drop=True)
    kind = out["kind"].to_numpy()
    is_p2p = kind > 0
    rooted = np.isin(out["op"].to_numpy(), _ROOTED_CODES)
    out.loc[~rooted & ~is_p2p, "root"] = -1
    peer = np.where(is_p2p, out["root"], -1)
    keys = pd.DataFrame({"rank": out["rank"], "comm": out["comm"], "kind": kind, "peer": peer})
    out["seq"] = keys.groupby(["rank", "comm", "kind", "peer"], sort=False).cumcount().astype("int64")
    out["op"] = OP_NAMES[out["op"].to_numpy(dtype=np.int64)]
    table = [(), *splits]
    out["split_bytes"] = pd.Series([table[k] for k in (out["fold"].to_numpy(dtype=np.int64) + 1).tolist()],
                                   index=out.index, dtype=object)
    return out.drop(columns=["run", "fold"])


def _fold(g: pd.DataFrame) -> tuple[pd.DataFrame, list[tuple[int, ...]]]:
    """One AllToAll row per folded Send/Recv group (``fold`` indexes the returned ``split_bytes`` list: bytes
    sent to each peer in peer order)."""
    if not len(g):
        return pd.DataFrame(columns=g.columns), []
    sends = g[g["kind"] == SEND].sort_values(["run", "root"], kind="stable")
    run = sends["run"].to_numpy()
    bounds = [0, *(np.flatnonzero(run[1:] != run[:-1]) + 1).tolist(), len(run)]
    sent = sends["bytes"].to_numpy(dtype=np.int64).tolist()  # slices of one list: no array per group
    splits = [tuple(sent[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    total = sends.groupby("run", sort=False)["count"].sum()
    head = g.sort_values("pos", kind="stable").groupby("run", sort=False).head(1).set_index("run")
    head = head.loc[total.index].copy()
    head["op"] = OP_CODE["AllToAll"]
    head["kind"] = COLL
    head["count"] = (total // head["nranks"]).to_numpy()
    head["bytes"] = head["count"] * head["size"]
    head["root"] = -1
    head["group"] = -1
    head["fold"] = np.arange(len(splits), dtype=np.int64)
    return head.reset_index(), splits


def apply_tuning(rows: pd.DataFrame, process: np.ndarray, tunings: dict[str, np.ndarray]) -> int:
    """Set ``algo``/``proto`` from TUNING lines; return how many TUNING lines matched no COLL line.

    ``tunings`` holds equal-length columns ``pos``, ``proc`` (process code as in ``process``), ``op``
    (printed name or None), ``nbytes``, ``algo``, ``proto``.

    A TUNING line is printed when the op is launched, after its COLL line, by the same process: it goes to
    the latest earlier collective of that process (within ``TUNING_WINDOW`` lines) not yet matched whose op
    (when printed) and size agree (``nBytes`` is count x size, times nranks for AllGather/ReduceScatter).
    Grouped launches print COLL a, COLL b, TUNING a, TUNING b: op and size tell a from b; identical ops
    are interchangeable. The choice is then copied to the
    other ranks of the same (comm, seq) collective, since every rank runs the same algorithm.
    """
    n_tun = len(tunings["pos"])
    rows["algo"] = ""
    rows["proto"] = ""
    if not n_tun or not len(rows):
        return n_tun
    cand = (rows["kind"].to_numpy() == COLL) & (rows["split_bytes"].map(len).to_numpy() == 0)
    cand_idx = np.flatnonzero(cand)
    order = np.lexsort((rows["pos"].to_numpy()[cand_idx], process[cand_idx]))
    cand_idx = cand_idx[order]
    cuts = np.flatnonzero(np.diff(process[cand_idx])) + 1
    by_proc = {int(process[part[0]]): part for part in np.split(cand_idx, cuts) if len(part)}
    pos = rows["pos"].to_numpy()
    ops, nbytes = rows["op"].to_numpy(), rows["bytes"].to_numpy()
    scaled = nbytes * np.where(rows["op"].isin(["AllGather", "ReduceScatter"]), rows["nranks"], 1)
    algo = np.full(len(rows), "", dtype=object)
    proto = np.full(len(rows), "", dtype=object)
    unmatched = 0
    t_order = np.lexsort((tunings["pos"], tunings["proc"]))
    t_proc = tunings["proc"][t_order]
    t_cuts = np.flatnonzero(np.diff(t_proc)) + 1
    taken = np.zeros(len(rows), dtype=bool)
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
    rows["algo"], rows["proto"] = algo, proto
    coll = rows["kind"] == COLL
    known = rows[coll & (rows["algo"] != "")].drop_duplicates(["comm", "seq"]).set_index(["comm", "seq"])
    if len(known):
        fill = coll & (rows["algo"] == "")
        keys = pd.MultiIndex.from_arrays([rows.loc[fill, "comm"], rows.loc[fill, "seq"]])
        found = keys.isin(known.index)
        where = rows.index[fill][found]
        rows.loc[where, "algo"] = known["algo"].reindex(keys[found]).to_numpy()
        rows.loc[where, "proto"] = known["proto"].reindex(keys[found]).to_numpy()
    return unmatched
