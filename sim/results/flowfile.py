"""Per-flow output streamed to Parquet: a sink of the engine's flow log that writes one row group per block.

The engine hands finished flows over in blocks (:mod:`sim.engine.flowlog`); :class:`FlowParquet` writes each
block as a row group as it comes, so a run's flows reach the disk without ever being held whole. Columns:
``op`` (row of ``collectives.parquet``), ``src`` / ``dst`` (the path's end nodes), ``hops``, ``bytes``,
``start_s``, ``sent_s`` (last byte sent) and ``end_s`` (last byte + path latency), in finishing order.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["FLOW_COLUMNS", "FlowParquet"]

FLOW_COLUMNS = ("op", "src", "dst", "hops", "bytes", "start_s", "sent_s", "end_s")

_SCHEMA = pa.schema([("op", pa.int64()), ("src", pa.string()), ("dst", pa.string()), ("hops", pa.int32()),
                     ("bytes", pa.float64()), ("start_s", pa.float64()), ("sent_s", pa.float64()),
                     ("end_s", pa.float64())])


class FlowParquet:
    """Write every finished flow to ``path`` (Parquet, one row group per block handed over).

    Parameters
    ----------
    path : str or Path
    links : pandas.DataFrame
        The router's link table (``src``, ``dst``): names the path's end nodes.

    Examples
    --------
    >>> import tempfile, os
    >>> from sim.engine.paths import PathTable
    >>> links = pd.DataFrame({"src": ["gpu0", "leaf0"], "dst": ["leaf0", "gpu1"]})
    >>> paths = PathTable(np.ones(2), np.ones(2)); ids, _ = paths.add(np.array([0, 2]), np.array([0, 1]))
    >>> out = os.path.join(tempfile.mkdtemp(), "flows.parquet"); sink = FlowParquet(out, links)
    >>> sink.add({"op": np.array([3]), "path": ids, "bytes": np.array([8.0]), "start": np.array([0.0]),
    ...           "sent": np.array([1e-6]), "end": np.array([3e-6])}, paths); sink.close(paths)
    >>> pd.read_parquet(out)[["op", "src", "dst", "hops"]].values.tolist()
    [[3, 'gpu0', 'gpu1', 2]]
    """

    def __init__(self, path: str | Path, links: pd.DataFrame) -> None:
        self.path = Path(path)
        self.src = links["src"].astype(str).to_numpy()
        self.dst = links["dst"].astype(str).to_numpy()
        self._writer: pq.ParquetWriter | None = None
        self.rows = 0

    def add(self, cols: dict, paths) -> None:
        """Write one block of finished flows as a row group."""
        ptr, plinks = paths.ptr, paths.links
        p = np.asarray(cols["path"], dtype=np.int64)
        a, b = ptr[p], ptr[p + 1]
        has = b > a   # a path without links (a local copy) has no end nodes
        src = np.where(has, self.src[plinks[np.where(has, a, 0)]] if len(plinks) else "", "")
        dst = np.where(has, self.dst[plinks[np.where(has, b - 1, 0)]] if len(plinks) else "", "")
        table = pa.table({"op": cols["op"], "src": src, "dst": dst, "hops": (b - a).astype(np.int32),
                          "bytes": cols["bytes"], "start_s": cols["start"], "sent_s": cols["sent"],
                          "end_s": cols["end"]}, schema=_SCHEMA)
        if self._writer is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._writer = pq.ParquetWriter(self.path, _SCHEMA)
        self._writer.write_table(table)
        self.rows += len(p)

    def close(self, paths=None) -> None:
        """Finish the file (an empty table when no flow came)."""
        if self._writer is None:
            pq.write_table(_SCHEMA.empty_table(), self.path)
        else:
            self._writer.close()
            self._writer = None
