"""The analytical tier's former per-key route table, kept as the test oracle of
:class:`sim.analytical.key_routes.KeyRoutes` (which must give its numbers bit for bit).

One table per flow key, called once per key: the analytical tier used it until session 22, when
``KeyRoutes`` replaced it with one table over (flow key, pair).
"""

from __future__ import annotations

import numpy as np

from sim.analytical.routes import path_bounds_auto
from topologies.routing import charge_walk, use_compiled_walk

#: The numpy link loads' extra CPU over the compiled ones (which touch only the op's own rows), per call
#: and per table entry: measured 35 ms against 19 ms for 10k transfers over a 5.5 M-entry table.
LOADS_CALL_S = 0.2e-3
LOADS_ENTRY_S = 3e-9
#: Keys whose table reaches this many pairs look rows up in a dense array over all GPU pairs (int32, when
#: there are at most DENSE_MAX_PAIRS of them) instead of a binary search per transfer.
DENSE_MIN_ROWS = 4096
DENSE_MAX_PAIRS = 1 << 22


class _KeyTable:
    """Routed pairs of one flow key: rows in routing order, each row's links contiguous (CSR)."""

    def __init__(self) -> None:
        self.pair = np.zeros(0, dtype=np.int64)  # sorted pair ids
        self.row = np.zeros(0, dtype=np.int64)   # row of each sorted pair
        self.dense: np.ndarray | None = None     # row of every pair id (-1: not routed), once the table is big
        self.rows_total = 0
        self.new_pairs: list[np.ndarray] = []
        self.new_rows: list[np.ndarray] = []
        self.s_per_byte = np.zeros(0)
        self.latency_s = np.zeros(0)
        self.blocks: list[tuple[np.ndarray, np.ndarray | None, np.ndarray]] = []  # (links, fraction, per row)
        self._flat: tuple[np.ndarray, np.ndarray | None, np.ndarray] | None = None
        self.row_ptr: np.ndarray | None = None  # CSR pointers of flat()'s rows, for the compiled loads

    def flat(self) -> tuple[np.ndarray, np.ndarray | None, np.ndarray]:
        """(link of every entry, its fraction of the row's bytes or None for all ones, entries per row)."""
        if self._flat is None:
            links = np.concatenate([blk[0] for blk in self.blocks])
            per_row = np.concatenate([blk[2] for blk in self.blocks])
            if all(blk[1] is None for blk in self.blocks):
                frac = None
            else:
                frac = np.concatenate([np.ones(len(blk[0])) if blk[1] is None else blk[1] for blk in self.blocks])
            self._flat = (links, frac, per_row)
            self.blocks = [self._flat]
            self.row_ptr = None
        return self._flat


class PairRoutes:
    """Lazily routed GPU pairs of a :class:`topologies.routing.Router`.

    Parameters
    ----------
    router : topologies.routing.Router

    Examples
    --------
    >>> from topologies import fat_tree
    >>> from topologies.routing import Router
    >>> pr = PairRoutes(Router(fat_tree(4, gpus_per_server=1)))
    >>> load, spb, lat = pr.loads(np.array([0, 1]), np.array([15, 15]), np.array([1e6, 1e6]), 7)
    >>> float(load.max())  # both flows end on gpu15's access link
    2000000.0
    """

    def __init__(self, router) -> None:
        self.router = router
        links = router.links
        self.capacity_bytes_per_s = links["capacity_gbps"].to_numpy(np.float64) * 1e9 / 8
        self.link_latency_s = links["latency_us"].to_numpy(np.float64) * 1e-6
        self.n_links = len(links)
        self.gpus = int(router.num_gpus)
        self.tables: dict[int, _KeyTable] = {}
        self.routed_pairs = 0
        self.batch_pairs = 1 << 20

    def _add(self, table: _KeyTable, pairs: np.ndarray, key: int) -> None:
        src, dst = np.divmod(pairs, self.gpus)
        routes = self.router.route(src, dst, np.full(len(pairs), key, dtype=np.int64))
        self.routed_pairs += len(pairs)
        link_ptr = np.asarray(routes.link_ptr, np.int64)
        link_idx = np.asarray(routes.link_idx, np.int64)
        sub_ptr = np.asarray(routes.sub_ptr, np.int64)
        frac = np.asarray(routes.fraction, np.float64)
        n_sub = len(frac)
        per_sub = np.diff(link_ptr)
        flow_of_sub = None if n_sub == len(pairs) else np.repeat(np.arange(len(pairs)), np.diff(sub_ptr))
        per_row = per_sub if n_sub == len(pairs) else \
            np.bincount(flow_of_sub, weights=per_sub, minlength=len(pairs)).astype(np.int64)
        # sub-flows are in flow order, so a row's entries are contiguous; a fraction only where sprayed
        entry_frac = None if bool(np.all(frac == 1.0)) else np.repeat(frac, per_sub)
        cap_min, lat = path_bounds_auto(link_ptr, link_idx, per_sub, self.capacity_bytes_per_s, self.link_latency_s)
        if n_sub == len(pairs):  # one sub-flow per pair (ecmp, single)
            spb, lat_flow = frac / cap_min, lat
        else:  # a sprayed flow sends fixed fractions in parallel: its bytes take at least the slowest one
            spb = np.maximum.reduceat(frac / cap_min, sub_ptr[:-1])
            lat_flow = np.minimum.reduceat(lat, sub_ptr[:-1])
        base = table.rows_total
        table.rows_total += len(pairs)
        table.blocks.append((link_idx, entry_frac, per_row))
        table._flat = None
        table.s_per_byte = np.concatenate([table.s_per_byte, spb])
        table.latency_s = np.concatenate([table.latency_s, lat_flow])
        table.new_pairs.append(pairs)
        table.new_rows.append(base + np.arange(len(pairs)))

    def rows(self, src: np.ndarray, dst: np.ndarray, key: int) -> tuple[_KeyTable, np.ndarray]:
        """The table of ``key`` and the row of every (src, dst) pair in it (routing new pairs first)."""
        table = self.tables.get(key)
        if table is None:
            table = self.tables[key] = _KeyTable()
        pairs = np.asarray(src, np.int64) * self.gpus + np.asarray(dst, np.int64)
        if not len(table.pair):
            # first use of the key: an all-to-all's pairs come sorted and distinct, so rows are their order
            ascending = bool(np.all(pairs[1:] > pairs[:-1]))
            new = pairs if ascending else np.unique(pairs)
            self._route_new(table, new, key)
            table.pair = new
            table.row = np.concatenate(table.new_rows) if table.new_rows else np.zeros(0, np.int64)
            table.new_pairs, table.new_rows = [], []
            return table, (table.row if ascending else table.row[np.searchsorted(table.pair, pairs)])
        if table.dense is None and len(table.pair) >= DENSE_MIN_ROWS and self.gpus ** 2 <= DENSE_MAX_PAIRS:
            table.dense = np.full(self.gpus ** 2, -1, dtype=np.int32 if table.rows_total < (1 << 31) else np.int64)
            table.dense[table.pair] = table.row
        if table.dense is not None:  # one gather; pairs not seen yet are routed and entered
            row = table.dense[pairs]
            unseen = row < 0
            if unseen.any():
                new = np.unique(pairs[unseen])
                self._route_new(table, new, key)
                table.dense[np.concatenate(table.new_pairs)] = np.concatenate(table.new_rows)
                table.new_pairs, table.new_rows = [], []
                row = table.dense[pairs]
            return table, row.astype(np.int64)
        pos = np.minimum(np.searchsorted(table.pair, pairs), len(table.pair) - 1)
        known = table.pair[pos] == pairs
        if not known.all():
            new = np.unique(pairs[~known])
            self._route_new(table, new, key)
            pair = np.concatenate([table.pair, *table.new_pairs])
            row = np.concatenate([table.row, *table.new_rows])
            table.new_pairs, table.new_rows = [], []
            order = np.argsort(pair, kind="stable")
            table.pair, table.row = pair[order], row[order]
            pos = np.searchsorted(table.pair, pairs)
        return table, table.row[pos]

    def _route_new(self, table: _KeyTable, new: np.ndarray, key: int) -> None:
        for lo in range(0, len(new), self.batch_pairs):  # the router's temporaries grow with the batch
            self._add(table, new[lo:lo + self.batch_pairs], key)

    def loads(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray, key: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bytes per link of transfers ``src -> dst`` on flow key ``key``, and each transfer's seconds per
        byte (its path's slowest link) and path latency."""
        table, rows = self.rows(src, dst, key)
        links, frac, per_row = table.flat()
        row_bytes = np.bincount(rows, weights=nbytes, minlength=table.rows_total)
        if not use_compiled_walk():  # numpy: the walk's size rule also counts what this costs beyond the kernel
            charge_walk(LOADS_CALL_S + LOADS_ENTRY_S * len(links))
        if use_compiled_walk():  # where the walk has loaded numba (or these charges have paid for it)
            from sim.analytical.kernels import link_loads

            if table.row_ptr is None:
                table.row_ptr = np.concatenate([[0], np.cumsum(per_row)])
            load = link_loads(links, np.zeros(0) if frac is None else frac, table.row_ptr, row_bytes, self.n_links)
        else:
            weight = np.repeat(row_bytes, per_row)
            if frac is not None:
                weight *= frac
            load = np.bincount(links, weights=weight, minlength=self.n_links)
        return load, table.s_per_byte[rows], table.latency_s[rows]
