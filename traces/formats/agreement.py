"""Do the members of each collective agree? Rows with the same (``comm``, ``seq``) are one collective
(SPEC §3): every member must show the same op, dtype and count (and root, for rooted ops). A torn line
read wrong, a member whose log starts later, or a communicator inferred wrongly shows up here.

An AllToAll with ``split_bytes`` (an all-to-all-v: PyTorch's ``all_to_all_single`` with splits, logged by
NCCL as a group of Sends and Recvs) moves a different amount from each rank, so its members' ``count``
(the mean per peer) may differ: such a collective is compared on op and dtype only, as
:func:`traces.checks.check_collectives` does. NCCL's own ``ncclAlltoAll`` takes one ``count`` that every
rank must pass, so an AllToAll without splits is compared on count like any collective."""

from __future__ import annotations

import numpy as np

from traces.lazy import lazy_module
from traces.schema import P2P_OPS, ROOTED_OPS

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

__all__ = ["disagreeing_collectives"]


def disagreeing_collectives(df: pd.DataFrame) -> tuple[int, str]:
    """Count the collectives whose members disagree, and describe the first one.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace.

    Returns
    -------
    (int, str)
        The number of (comm, seq) collectives whose rows differ on op, dtype or count (or root, for
        Broadcast/Reduce/Gather/Scatter; count is not compared in a collective where a member has
        ``split_bytes``), and ``"comm C seq S: rank R AllReduce 4 fp32, ..."`` for the first
        (in comm, seq order), or ``""``.

    Examples
    --------
    >>> rows = pd.DataFrame({"comm": ["c"] * 3, "seq": [0, 0, 1], "rank": [0, 1, 0], "op": ["AllReduce"] * 3,
    ...                      "count": [4, 5, 4], "dtype": ["fp32"] * 3, "root": [-1] * 3})
    >>> disagreeing_collectives(rows)
    (1, 'comm c seq 0: rank 0 AllReduce 4 fp32, rank 1 AllReduce 5 fp32')

    Uneven all-to-all (``split_bytes`` set) agrees on op and dtype alone:

    >>> a2a = pd.DataFrame({"comm": ["c"] * 2, "seq": [0, 0], "rank": [0, 1], "op": ["AllToAll"] * 2,
    ...                     "count": [3, 5], "dtype": ["fp32"] * 2, "root": [-1] * 2,
    ...                     "split_bytes": [(8, 16), (24, 16)]})
    >>> disagreeing_collectives(a2a)
    (0, '')
    """
    if not len(df):
        return 0, ""
    coll = df[~df["op"].isin(P2P_OPS)]
    if not len(coll):
        return 0, ""
    root = np.where(coll["op"].isin(ROOTED_OPS).to_numpy(), coll["root"].to_numpy(), -1)
    count = coll["count"].to_numpy()
    if "split_bytes" in coll.columns:
        has_split = pd.Series(np.fromiter(map(len, coll["split_bytes"].to_numpy()), dtype=np.int64,
                                          count=len(coll)) > 0, index=coll.index)
        uneven = has_split.groupby([coll["comm"], coll["seq"]]).transform("any").to_numpy()
        count = np.where(uneven, -1, count)  # members of an all-to-all-v send different amounts
    key = coll[["comm", "seq"]].assign(_sig=pd.factorize(pd.MultiIndex.from_arrays(
        [coll["op"].to_numpy(), count, coll["dtype"].to_numpy(), root]))[0])
    n_sig = key.groupby(["comm", "seq"], sort=True)["_sig"].nunique()
    bad = n_sig[n_sig > 1]
    if not len(bad):
        return 0, ""
    comm, seq = bad.index[0]
    first = coll[(coll["comm"] == comm) & (coll["seq"] == seq)].sort_values("rank")
    parts = [f"rank {r.rank} {r.op} {r.count} {r.dtype}" + (f" root {r.root}" if r.op in ROOTED_OPS else "")
             for r in first.itertuples()]
    return len(bad), f"comm {comm} seq {seq}: " + ", ".join(parts[:4]) + (" ..." if len(parts) > 4 else "")
