"""Routes of (flow key, GPU pair) rows in one table: every key of an op looked up and loaded at once.

:class:`PairRoutes` (the former per-key table, now the test oracle in
``tests/sim/analytical/pair_routes_oracle.py``) kept one table per flow key and was called once per key. A
direct plan with NCCL's p2p PXN gives every sender's network leg a key of its own (the sender's
connection, :data:`sim.planning.pxn.CONNECTION_STRIDE`), so an all-to-all over ``n`` GPUs has ``n + 1``
keys and the per-key calls (and a mask over the whole plan per key) cost ``O(n)`` Python calls and
``O(n x transfers)`` work per op: 47 s of the 1,024-GPU decode step. :class:`KeyRoutes` holds the same rows
in one table over ids ``key x gpus^2 + pair`` and serves all keys of an op in a fixed number of numpy
calls.

It gives :class:`PairRoutes`' numbers bit for bit (``tests/sim/analytical/test_key_routes.py``): rows of a
key are numbered in the same order (first op that used the pair, then ascending pair), every row is
routed by the same :meth:`topologies.routing.Router.route` flow (the route of a flow does not depend on
the batch), and link loads are added in the same order (per key, its rows in row order, starting from
zero; then the keys' sums in ascending key order).
"""

from __future__ import annotations

import numpy as np

from sim.analytical.routes import path_bounds_auto
from topologies.routing import charge_walk, use_compiled_walk

__all__ = ["LOADS_CALL_S", "LOADS_ENTRY_S", "LOADS_MIN_TRANSFERS", "KeyRoutes", "grouped_loads_numpy"]

#: The numpy loads' extra CPU over the compiled kernel, per call and per entry of the op's rows (a charge
#: towards loading numba, as the per-key table's own entry charge did).
LOADS_CALL_S = 0.2e-3
LOADS_ENTRY_S = 100e-9
#: An op with this many transfers loads the compiled kernel at once (the numpy loads of a 1,024-GPU decode
#: all-to-all, 113k pairs and their PXN legs, cost about 40 ms each under load, against 0.75 s to load
#: numba once for 116 of them).
LOADS_MIN_TRANSFERS = 100_000


class _Grow:
    """A growing 1-d array (capacity grows by half: appending is amortised O(1), at most 1.5x the size)."""

    def __init__(self, dtype) -> None:
        self.buf = np.zeros(16, dtype=dtype)
        self.n = 0

    def append(self, values: np.ndarray) -> None:
        need = self.n + len(values)
        if need > len(self.buf):
            bigger = np.zeros(max(need, len(self.buf) * 3 // 2), dtype=self.buf.dtype)
            bigger[:self.n] = self.buf[:self.n]
            self.buf = bigger
        self.buf[self.n:need] = values
        self.n = need

    def view(self) -> np.ndarray:
        return self.buf[:self.n]


def grouped_loads_numpy(group, rows, row_bytes, row_ptr, links, frac, n_links):
    """Bytes per link: per group (ascending), the sum over its rows (in order) of ``row_bytes`` x fraction
    on each of the row's links, from zero; then the groups' sums added per link in group order.

    The numpy twin of :func:`sim.analytical.kernels.grouped_loads` (the same additions in the same order).

    Parameters
    ----------
    group : ndarray of int64
        Group of each entry of ``rows`` (non-decreasing).
    rows : ndarray of int64
        Table rows (within a group, ascending).
    row_bytes : ndarray of float64
        Bytes of each of ``rows``.
    row_ptr, links : ndarray of int64
        CSR links of every table row.
    frac : ndarray of float64
        Fraction of each link entry (empty: all ones).
    n_links : int

    Examples
    --------
    >>> grouped_loads_numpy(np.array([0, 1]), np.array([0, 0]), np.array([1.0, 2.0]), np.array([0, 2]),
    ...                     np.array([0, 1]), np.zeros(0), 3).tolist()
    [3.0, 3.0, 0.0]
    """
    lens = row_ptr[rows + 1] - row_ptr[rows]
    total = int(lens.sum())
    if total == 0:
        return np.zeros(n_links)
    starts = np.repeat(row_ptr[rows] - (np.cumsum(lens) - lens), lens)
    entry = starts + np.arange(total, dtype=np.int64)
    weight = np.repeat(row_bytes, lens)
    if len(frac):
        weight = weight * frac[entry]
    group = np.asarray(group, np.int64) - int(group[0])
    cell, inverse = np.unique(np.repeat(group, lens) * n_links + links[entry], return_inverse=True)
    part = np.bincount(inverse.ravel(), weights=weight, minlength=len(cell))  # each in entry order
    return np.bincount(cell % n_links, weights=part, minlength=n_links)        # groups in ascending order


class KeyRoutes:
    """Lazily routed (flow key, GPU pair) rows of a :class:`topologies.routing.Router`, one table.

    Parameters
    ----------
    router : topologies.routing.Router

    Examples
    --------
    >>> from topologies import fat_tree
    >>> from topologies.routing import Router
    >>> kr = KeyRoutes(Router(fat_tree(4, gpus_per_server=1)))
    >>> load, spb, lat = kr.loads(np.array([0, 1]), np.array([15, 15]), np.array([1e6, 1e6]), np.array([7, 8]))
    >>> float(load.max()), kr.routed_pairs  # both flows end on gpu15's access link; two (key, pair) rows
    (2000000.0, 2)
    """

    def __init__(self, router) -> None:
        self.router = router
        links = router.links
        self.capacity_bytes_per_s = links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
        self.link_latency_s = links["latency_us"].to_numpy(np.float64) * 1e-6
        self.n_links = len(links)
        self.gpus = int(router.num_gpus)
        self.ids = np.zeros(0, dtype=np.int64)     # sorted key x gpus^2 + pair
        self.id_row = np.zeros(0, dtype=np.int64)  # row of each sorted id
        self.links = _Grow(np.int64)               # CSR entries of all rows
        self.frac: _Grow | None = None             # their fractions, kept from the first sprayed row on
        self.row_ptr = _Grow(np.int64)
        self.row_ptr.append(np.zeros(1, np.int64))
        self.s_per_byte = _Grow(np.float64)
        self.latency_s = _Grow(np.float64)
        self.routed_pairs = 0
        self.batch_pairs = 1 << 20

    def _add(self, new_ids: np.ndarray) -> None:
        """Route rows ``new_ids`` (ascending) and append them (same per-row figures as PairRoutes._add)."""
        g2 = self.gpus * self.gpus
        key, pair = np.divmod(new_ids, g2)
        src, dst = np.divmod(pair, self.gpus)
        routes = self.router.route(src, dst, key)
        self.routed_pairs += len(new_ids)
        link_ptr = np.asarray(routes.link_ptr, np.int64)
        link_idx = np.asarray(routes.link_idx, np.int64)
        sub_ptr = np.asarray(routes.sub_ptr, np.int64)
        frac = np.asarray(routes.fraction, np.float64)
        n_sub, n = len(frac), len(new_ids)
        per_sub = np.diff(link_ptr)
        per_row = per_sub if n_sub == n else \
            np.bincount(np.repeat(np.arange(n), np.diff(sub_ptr)), weights=per_sub, minlength=n).astype(np.int64)
        cap_min, lat = path_bounds_auto(link_ptr, link_idx, per_sub, self.capacity_bytes_per_s, self.link_latency_s)
        if n_sub == n:  # one sub-flow per pair (ecmp, single)
            spb, lat_flow = frac / cap_min, lat
        else:  # a sprayed flow sends fixed fractions in parallel: its bytes take at least the slowest one
            spb = np.maximum.reduceat(frac / cap_min, sub_ptr[:-1])
            lat_flow = np.minimum.reduceat(lat, sub_ptr[:-1])
        if self.frac is None and not np.all(frac == 1.0):  # ones for the rows so far, then every row's
            self.frac = _Grow(np.float64)
            self.frac.append(np.ones(self.links.n))
        self.links.append(link_idx)
        if self.frac is not None:
            self.frac.append(np.repeat(frac, per_sub))
        self.row_ptr.append(self.row_ptr.buf[self.row_ptr.n - 1] + np.cumsum(per_row))
        self.s_per_byte.append(spb)
        self.latency_s.append(lat_flow)

    def rows(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray) -> np.ndarray:
        """The row of every (key, src, dst), routing and entering the new ones first."""
        uniq, inverse, rows = self._unique_rows(src, dst, key)
        return rows[inverse]

    def _unique_rows(self, src, dst, key) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Distinct ids of the transfers (ascending), each transfer's index into them, and their rows."""
        g2 = self.gpus * self.gpus
        key = np.asarray(key, np.int64)
        if len(key) and (int(key.min()) < 0 or int(key.max()) >= np.iinfo(np.int64).max // max(g2, 1)):
            raise ValueError("flow keys out of range for KeyRoutes ids")
        q = key * g2 + np.asarray(src, np.int64) * self.gpus + np.asarray(dst, np.int64)
        # sorted queries: the binary searches walk the table in order (10x faster than in transfer order)
        uniq, inverse = np.unique(q, return_inverse=True)
        inverse = inverse.ravel()
        n_ids = len(self.ids)
        pos = np.searchsorted(self.ids, uniq)
        found = np.zeros(len(uniq), bool) if n_ids == 0 else (self.ids[np.minimum(pos, n_ids - 1)] == uniq)
        if found.all():
            return uniq, inverse, self.id_row[pos]
        new = uniq[~found]  # ascending: per key, its new pairs in ascending order (PairRoutes' row order)
        first = self.s_per_byte.n
        for lo in range(0, len(new), self.batch_pairs):  # the router's temporaries grow with the batch
            self._add(new[lo:lo + self.batch_pairs])
        new_rows = first + np.arange(len(new), dtype=np.int64)
        rows = np.empty(len(uniq), dtype=np.int64)
        rows[found] = self.id_row[pos[found]]
        rows[~found] = new_rows
        at = pos[~found]
        self.ids = np.insert(self.ids, at, new)
        self.id_row = np.insert(self.id_row, at, new_rows)
        return uniq, inverse, rows

    def loads(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, key: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bytes per link of transfers ``src -> dst`` on flow keys ``key`` (one per transfer), and each
        transfer's seconds per byte (its path's slowest link) and path latency.

        The loads are :class:`PairRoutes`' per-key loads summed over the keys in ascending order.
        """
        uniq, inverse, urows = self._unique_rows(src, dst, key)
        if not len(inverse):
            return np.zeros(self.n_links), np.zeros(0), np.zeros(0)
        # per distinct (key, pair): its bytes, summed in transfer order; then ordered by (key, row)
        ubytes = np.bincount(inverse, weights=nbytes, minlength=len(uniq))
        ukey = uniq // (self.gpus * self.gpus)
        total_rows = self.s_per_byte.n
        order = np.argsort((ukey - ukey[0]) * total_rows + urows)
        group, cell_rows, row_bytes = ukey[order], urows[order], ubytes[order]
        frac = np.zeros(0) if self.frac is None else self.frac.view()
        row_ptr, links = self.row_ptr.view(), self.links.view()
        if len(inverse) >= LOADS_MIN_TRANSFERS or use_compiled_walk():  # numba loaded, or it pays at once
            from sim.analytical.kernels import grouped_loads

            load = grouped_loads(group, cell_rows, row_bytes, row_ptr, links, frac, self.n_links)
        else:
            load = grouped_loads_numpy(group, cell_rows, row_bytes, row_ptr, links, frac, self.n_links)
            charge_walk(LOADS_CALL_S + LOADS_ENTRY_S * len(inverse))
        # per distinct row first (ascending ids: the table read nearly in order), then spread to the
        # transfers from that small array: the same values as gathering the table per transfer
        return load, self.s_per_byte.view()[urows][inverse], self.latency_s.view()[urows][inverse]
