"""The flow log of a replay: one row per flow (network flows and flows of ops replayed from records)."""

from __future__ import annotations

import numpy as np

from sim.engine.csr import GrowArray

__all__ = ["FlowLog"]

_COLUMNS = (("op", np.int64, -1), ("sub", np.int64, -1), ("path", np.int64, -1), ("bytes", np.float64, 0.0),
            ("start", np.float64, np.nan), ("sent", np.float64, np.nan), ("end", np.float64, np.nan),
            ("lat", np.float64, np.nan), ("dead", np.bool_, False))


class FlowLog:
    """Growing per-flow columns: ``op``, ``sub`` (sub-flow of the op's prepared op), ``path`` (id in the
    engine's path table), ``bytes``, ``start`` / ``sent`` (last byte) / ``end`` (last byte + latency), ``lat``
    (path latency), ``dead`` (rows dropped when a replayed op is materialised; left out of the result).

    Each column is a :class:`GrowArray`; ``col.a[rows]`` reads and writes it.

    Examples
    --------
    >>> log = FlowLog()
    >>> rows = log.append(3); log.op.a[rows] = 7; log.kill(rows[:1])
    >>> log.columns()["op"].tolist()
    [7, 7]
    """

    def __init__(self) -> None:
        self.n = 0
        self.any_dead = False
        for name, dtype, fill in _COLUMNS:
            setattr(self, name, GrowArray(dtype, fill))

    def append(self, k: int) -> np.ndarray:
        """Reserve ``k`` new rows; return their indices."""
        rows = np.arange(self.n, self.n + k, dtype=np.int64)
        self.n += k
        for name, _, _ in _COLUMNS:
            getattr(self, name).ensure(self.n)
        return rows

    def kill(self, rows: np.ndarray) -> None:
        """Drop rows from the result (their data stays readable)."""
        if len(rows):
            self.dead.a[rows] = True
            self.any_dead = True

    def columns(self) -> dict[str, np.ndarray]:
        """Copies of the live rows of ``op``, ``path``, ``bytes``, ``start``, ``sent``, ``end``."""
        n = self.n
        keep = ~self.dead.a[:n] if self.any_dead else slice(None)
        return {name: getattr(self, name).a[:n][keep].copy() for name in ("op", "path", "bytes", "start", "sent",
                                                                          "end")}
