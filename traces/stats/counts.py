"""Operation counts (SPEC §7 ``op_counts.csv``) and the Send/Recv pairs they count (definitions: :mod:`traces.stats`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traces.schema import COLLECTIVE_OPS, P2P_OPS
from traces.stats.tables import comm_members, sorted_by_op

__all__ = ["op_counts", "p2p_pairs"]


def p2p_pairs(df: pd.DataFrame) -> pd.DataFrame:
    """Match Sends with Recvs (SPEC §3 ``seq`` rule) and count pairs per communicator.

    The Send on rank a to comm rank ``root`` is matched with the Recv on the peer b whose ``root`` is a's comm
    rank and whose ``seq`` is the same. Comm ranks are turned into global ranks with the metadata's ``comms``;
    rows of a communicator the metadata does not list cannot be matched and are counted unmatched.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace (metadata in ``df.attrs["collsim"]``).

    Returns
    -------
    pandas.DataFrame
        One row per communicator with point-to-point rows: ``comm``, ``pairs`` (matched Send/Recv pairs),
        ``unmatched_send``, ``unmatched_recv`` (rows without a partner).

    Examples
    --------
    >>> from traces.schema import new_metadata
    >>> rows = [dict(rank=0, comm="c", seq=0, op="Send", root=1), dict(rank=1, comm="c", seq=0, op="Recv", root=0)]
    >>> df = pd.DataFrame(rows)
    >>> df.attrs["collsim"] = new_metadata(2, {"c": [0, 1]}, "doc")
    >>> p2p_pairs(df).to_dict("records")
    [{'comm': 'c', 'pairs': 1, 'unmatched_send': 0, 'unmatched_recv': 0}]
    """
    columns = ["comm", "pairs", "unmatched_send", "unmatched_recv"]
    p2p = df.loc[df["op"].isin(P2P_OPS), ["rank", "comm", "seq", "op", "root"]]
    if p2p.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c == "comm" else "int64") for c in columns})
    members = comm_members(df)
    peer = np.full(len(p2p), -1, dtype=np.int64)
    comm_codes, comm_names = pd.factorize(p2p["comm"])
    root = p2p["root"].to_numpy(dtype=np.int64)
    for code, name in enumerate(comm_names):
        ranks = members.get(str(name))
        if ranks is None:
            continue
        rows = comm_codes == code
        ok = rows & (root >= 0) & (root < len(ranks))
        peer[ok] = ranks[root[ok]]
    rank = p2p["rank"].to_numpy(dtype=np.int64)
    is_send = (p2p["op"] == "Send").to_numpy()
    # A pair's key is (comm, sender, receiver, seq), read from either side.
    keyed = pd.DataFrame({
        "comm": p2p["comm"].to_numpy(),
        "src": np.where(is_send, rank, peer),
        "dst": np.where(is_send, peer, rank),
        "seq": p2p["seq"].to_numpy(),
        "send": is_send.astype(np.int64),
        "recv": (~is_send).astype(np.int64),
        "known": peer >= 0,
    })
    known = keyed[keyed["known"]]
    per_key = known.groupby(["comm", "src", "dst", "seq"], sort=False)[["send", "recv"]].sum()
    per_key["pairs"] = np.minimum(per_key["send"], per_key["recv"])
    pairs = per_key.groupby(level="comm", sort=False)["pairs"].sum()
    sends = keyed.groupby("comm", sort=False)["send"].sum()
    recvs = keyed.groupby("comm", sort=False)["recv"].sum()
    out = pd.DataFrame({"send": sends, "recv": recvs})
    out["pairs"] = pairs.reindex(out.index).fillna(0).astype("int64")
    out["unmatched_send"] = out["send"] - out["pairs"]
    out["unmatched_recv"] = out["recv"] - out["pairs"]
    out = out.rename_axis("comm").reset_index()
    return out[columns].sort_values("comm", kind="stable").reset_index(drop=True)


def op_counts(df: pd.DataFrame, by_comm: bool = False) -> pd.DataFrame:
    """Operation types and counts (SPEC §7 ``op_counts.csv``).

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.
    by_comm : bool
        One row per (``comm``, ``op``) instead of per ``op``.

    Returns
    -------
    pandas.DataFrame
        ``[comm,] op, calls, rank_calls, bytes_total, partial_calls`` (see the module docstring), ops in SPEC
        order, only the ops present.

    Examples
    --------
    >>> from traces.schema import new_metadata
    >>> df = pd.DataFrame(dict(rank=[0, 1, 0, 1], comm="c", seq=[0, 0, 1, 1], op="AllReduce", bytes=8,
    ...                        nranks=2, root=-1))
    >>> df.attrs["collsim"] = new_metadata(2, {"c": [0, 1]}, "doc")
    >>> op_counts(df)[["op", "calls", "rank_calls", "bytes_total"]].to_dict("records")
    [{'op': 'AllReduce', 'calls': 2, 'rank_calls': 4, 'bytes_total': 32}]
    """
    keys = ["comm", "op"] if by_comm else ["op"]
    columns = [*keys, "calls", "rank_calls", "bytes_total", "partial_calls"]
    if df.empty:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("comm", "op") else "int64") for c in columns})
    rows = df.groupby(keys, sort=False).agg(rank_calls=("bytes", "size"), bytes_total=("bytes", "sum"))

    coll = df.loc[df["op"].isin(COLLECTIVE_OPS)]
    groups = coll.groupby(["comm", "seq", "op"], sort=False).agg(ranks=("rank", "nunique"), nranks=("nranks", "max"))
    groups["partial"] = (groups["ranks"] < groups["nranks"]).astype("int64")
    group_keys = [k for k in ("comm", "op") if k in keys]
    calls = groups.groupby(level=group_keys, sort=False).agg(calls=("partial", "size"), partial_calls=("partial", "sum"))

    pairs = p2p_pairs(df)
    if not pairs.empty:
        p2p = pd.concat([
            pairs.assign(op="Send", calls=pairs["pairs"] + pairs["unmatched_send"], partial_calls=pairs["unmatched_send"]),
            pairs.assign(op="Recv", calls=pairs["pairs"] + pairs["unmatched_recv"], partial_calls=pairs["unmatched_recv"]),
        ])
        p2p = p2p[p2p["calls"] > 0].groupby(keys, sort=False)[["calls", "partial_calls"]].sum()
        calls = pd.concat([calls, p2p])
    table = rows.join(calls, how="left").fillna(0).reset_index()
    for name in ("calls", "rank_calls", "bytes_total", "partial_calls"):
        table[name] = table[name].astype("int64")
    return sorted_by_op(table[columns], keys)
