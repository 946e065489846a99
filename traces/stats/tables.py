"""What the characterisation tables share: SPEC op order and the communicators of the metadata."""

from __future__ import annotations

import numpy as np
import pandas as pd

from traces.schema import METADATA_KEY, OPS

__all__ = ["comm_members", "op_order", "sorted_by_op"]


def op_order(ops: pd.Series) -> pd.Series:
    """Sort key: SPEC §3 op order, unknown names last."""
    rank = {op: i for i, op in enumerate(OPS)}
    return ops.map(lambda op: rank.get(op, len(OPS)))


def sorted_by_op(table: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``table`` sorted by ``keys``, with ``op`` in SPEC §3 order; a fresh index."""
    if table.empty:
        return table.reset_index(drop=True)
    order = table.assign(_op=op_order(table["op"])) if "op" in table.columns else table.assign(_op=0)
    sort_keys = [k for k in keys if k != "op"] + ["_op"]
    return order.sort_values(sort_keys, kind="stable").drop(columns="_op").reset_index(drop=True)


def comm_members(df: pd.DataFrame) -> dict[str, np.ndarray]:
    """Communicator -> global ranks in comm-rank order, from the trace metadata."""
    comms = (df.attrs.get(METADATA_KEY) or {}).get("comms") or {}
    return {str(c): np.asarray(ranks, dtype=np.int64) for c, ranks in comms.items()}
