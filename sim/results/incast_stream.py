"""Incast detection as the flows finish: a sink of the engine's flow log, same events as the sweep after the run.

:func:`sim.results.incast.incast_events` needs the whole flow log: every flow's incidences at switch egress
ports, sorted at once (at 256 GPUs, millions of flows, gigabytes of temporaries). :class:`IncastStream`
computes the same events from flows handed over as they finish (:mod:`sim.engine.flowlog`), in rounds. It
relies on one fact the engine provides (``set_horizon``): no flow handed over later starts before the
*horizon* ``W``. A round then finalises what later flows can no longer change:

1. **intervals**: each (port, sender)'s flows merge into maximal overlapping intervals (rate: the largest
   line rate among them). An interval that ends before ``W`` is closed (a later flow starts at or after
   ``W``, after its end, so it starts a new interval); an open one is kept as one summary interval
   (start, end so far, rate so far), which merges with later flows exactly as its flows would.
2. **sweep**: per port, fan-in and demand change at the ends of closed intervals. A stretch between two
   changes is final when it ends at or before ``F`` = min(``W``, start of the port's open intervals):
   later changes all come at or after ``F``. The rest waits, with the fan-in and demand before it.
3. **events**: maximal runs of final stretches with fan-in >= 2 and demand above capacity; a run that
   reaches the end of the final stretches stays open (its start and maxima so far) for the next round.

Rounds run when enough incidences are waiting, and once more at the end (``close``, ``W`` = inf). Memory is
what is not final: the flows since the horizon, not the run's flows. Fan-in and the event times are the
sweep's exactly; demand sums the same rates in another order (float rounding, far below the 1e-9
threshold margin). The round trip per port, the median one-way latency of the port's incidences, comes
from a count of flows per path (a path's latency is the same at each of its ports), expanded to counts per
(port, latency) at the end: it never holds one entry per incidence.
"""

from __future__ import annotations

from collections.abc import Callable

import networkx as nx
import numpy as np
import pandas as pd

from sim.engine.csr import GrowArray, csr_take
from sim.results.incast import empty_incast, events_frame, group_running_max, path_table, port_table
from sim.results.sortkeys import lex_order

__all__ = ["IncastStream"]

_F, _I = np.float64, np.int64


def _within_port_cumsum(port: np.ndarray, vals: np.ndarray) -> np.ndarray:
    """Running sum of ``vals`` inside each run of equal ``port`` (sorted by port)."""
    cs = np.cumsum(vals)
    first = np.r_[True, port[1:] != port[:-1]] if len(port) else np.zeros(0, bool)
    base = np.where(first, cs - vals, np.nan)
    return cs - pd.Series(base).ffill().to_numpy()


class IncastStream:
    """Streaming incast detection (see the module docstring); ``table`` after :meth:`close`.

    Parameters
    ----------
    links : pandas.DataFrame
        The router's link table (``src``, ``dst``, ``kind``, ``capacity_gbps``, ``latency_us``).
    graph : networkx.Graph
        For node kinds.
    chunk : int
        Incidences waiting before a round runs.
    """

    def __init__(self, links: pd.DataFrame, graph: nx.Graph, chunk: int = 1 << 18) -> None:
        self.links = links
        self.is_port, self.cap, self.lat_us, self.gpu_of_src = port_table(links, graph)
        self.chunk = int(chunk)
        self._n_send = int(self.gpu_of_src.max(initial=-1)) + 2   # sender ids -1 .. max, shifted by 1
        self.horizon: Callable[[], float] = lambda: -np.inf
        n = len(self.cap)
        # per path (computed as paths appear): upstream rate per incidence, latency, sender
        self._n_paths = 0
        # (growing by doubling: paths keep appearing all run long, a concatenation per hand-over copied all)
        self._up, self._plat, self._sender = GrowArray(_F, np.inf), GrowArray(_F, 0.0), GrowArray(_I, -1)
        self._pending: list[tuple] = []
        self._n_pending = 0
        self._open = (np.zeros(0, _I), np.zeros(0, _I), np.zeros(0), np.zeros(0), np.zeros(0))
        self._left = (np.zeros(0, _I), np.zeros(0), np.zeros(0, _I), np.zeros(0))
        self._carry_f = np.zeros(n, _I)
        self._carry_d = np.zeros(n)
        self._run_on = np.zeros(n, bool)
        self._run = np.zeros((n, 4))   # t0, t1, max fan-in, max demand of a port's open run
        self._events: list[tuple] = []
        self._lat = (np.zeros(0, _I), np.zeros(0), np.zeros(0, _I))   # port, latency, count (at close)
        self._path_flows = GrowArray(_I, 0)   # flows per path so far: each adds its path's latency at its ports
        self._paths = None   # the path table the flows come with
        self.table: pd.DataFrame | None = None
        self.peak_waiting = 0

    def set_horizon(self, fn: Callable[[], float]) -> None:
        """``fn()``: no flow handed over from now on starts before this time (the engine's promise)."""
        self.horizon = fn

    # -- flows in ------------------------------------------------------------------------------------
    def _paths_up_to(self, paths) -> None:
        n1 = len(paths)
        if n1 <= self._n_paths:
            return
        ptr, plinks = paths.ptr, paths.links
        n0 = self._n_paths
        sub_ptr = ptr[n0:n1 + 1] - ptr[n0]
        up, plat, sender = path_table(sub_ptr, plinks[ptr[n0]:ptr[n1]], self.cap, self.lat_us, self.gpu_of_src)
        lo, hi = ptr[n0], ptr[n1]   # the new paths' incidences: rows lo .. hi - 1 of the path table's links
        self._up.ensure(hi)
        self._up.a[lo:hi] = up
        for col, vals in ((self._plat, plat), (self._sender, sender)):
            col.ensure(n1)
            col.a[n0:n1] = vals
        self._path_flows.ensure(n1)
        self._n_paths = n1

    def add(self, cols: dict, paths) -> None:
        """Flows that finished (``path``, ``bytes``, ``start``, ``sent``)."""
        t0, t1, nbytes = cols["start"], cols["sent"], cols["bytes"]
        fl = np.flatnonzero(np.isfinite(t0) & np.isfinite(t1) & (t1 > t0) & (nbytes > 0))
        if len(fl) == 0:
            return
        self._paths_up_to(paths)
        self._paths = paths
        ptr, plinks = paths.ptr, paths.links
        fpath = cols["path"][fl]
        self._path_flows.a[:self._n_paths] += np.bincount(fpath, minlength=self._n_paths)
        fptr, _ = csr_take(ptr, plinks, fpath)
        fdeg = np.diff(fptr)
        pos = np.arange(fptr[-1]) - np.repeat(fptr[:-1] - ptr[fpath], fdeg)
        inc = np.repeat(np.arange(len(fl)), fdeg)
        port = plinks[pos]
        keep = self.is_port[port]
        port, pos, inc = port[keep], pos[keep], inc[keep]
        if len(port) == 0:
            return
        p = fpath[inc]
        self._pending.append((port, self._sender.a[p], t0[fl][inc], t1[fl][inc],
                              np.minimum(self._up.a[pos], self.cap[port])))
        self._n_pending += len(port)
        if self._n_pending >= self.chunk:
            self._round(float(self.horizon()))
            waiting = len(self._open[0]) + len(self._left[0])
            self.peak_waiting = max(self.peak_waiting, waiting + self._n_pending)
            self.chunk = max(self.chunk, 2 * waiting)   # amortised: a round frees at least half of a chunk

    def close(self, paths=None) -> None:
        """The run is over: a last round finalises everything; ``table`` holds the events."""
        self._round(np.inf)
        if not self._events:
            self.table = empty_incast()
            return
        port, t0, t1, fan, dem = (np.concatenate(x) for x in zip(*self._events, strict=True))
        self._reduce_latencies(paths if paths is not None else self._paths)
        self.table = events_frame(self.links, port, t0, t1, fan, dem, 2 * self._median_latency(port))

    # -- a round ---------------------------------------------------------------------------------------
    def _round(self, w: float) -> None:
        final = not np.isfinite(w)
        closed = self._merge(w)
        segs = self._sweep(closed, w, final)
        self._runs(segs, final)

    def _merge(self, w: float):
        """Stage 1: (port, sender) intervals; returns the closed ones, keeps the open ones."""
        parts = [self._open, *self._pending]
        self._pending, self._n_pending = [], 0
        port, sender, a, b, rate = (np.concatenate(x) for x in zip(*parts, strict=True))
        # (port, sender) as one integer key, sorted by its 16-bit digits (radix passes) after a stable
        # sort of the starts (nearly sorted: flows come in finishing order): np.lexsort's permutation
        order = lex_order((a, port * self._n_send + (sender + 1)))
        port, sender, a, b, rate = port[order], sender[order], a[order], b[order], rate[order]
        if len(port) == 0:
            return port, a, b, rate
        grp_new = np.r_[True, (port[1:] != port[:-1]) | (sender[1:] != sender[:-1])]
        run_max = group_running_max(np.cumsum(grp_new) - 1, b)
        new_iv = grp_new | np.r_[True, a[1:] > run_max[:-1]]
        starts = np.flatnonzero(new_iv)
        ends = np.r_[starts[1:], len(a)] - 1
        iv_port, iv_sender, iv_a, iv_b = port[starts], sender[starts], a[starts], run_max[ends]
        iv_rate = np.maximum.reduceat(rate, starts)
        shut = iv_b < w
        keep = ~shut
        self._open = (iv_port[keep], iv_sender[keep], iv_a[keep], iv_b[keep], iv_rate[keep])
        return iv_port[shut], iv_a[shut], iv_b[shut], iv_rate[shut]

    def _sweep(self, closed, w: float, final: bool):
        """Stage 2: fan-in and demand per port; returns the final stretches, keeps the rest."""
        c_port, c_a, c_b, c_rate = closed
        lp, lt, ld, lr = self._left
        ones = np.ones(len(c_port), _I)
        ev_port = np.concatenate([lp, c_port, c_port])
        ev_t = np.concatenate([lt, c_a, c_b])
        ev_d = np.concatenate([ld, ones, -ones])
        ev_r = np.concatenate([lr, c_rate, -c_rate])
        order = np.lexsort((ev_d, ev_t, ev_port))   # ends first at equal times: intervals are half-open
        ev_port, ev_t, ev_d, ev_r = ev_port[order], ev_t[order], ev_d[order], ev_r[order]
        n = len(ev_port)
        same_next = np.r_[ev_port[1:] == ev_port[:-1], False]
        t_next = np.r_[ev_t[1:], ev_t[-1]] if n else ev_t
        if final:
            done = np.ones(n, bool)
        else:
            bound = np.full(len(self.cap), w)
            np.minimum.at(bound, self._open[0], self._open[2])   # open intervals still change their port
            done = same_next & (t_next <= bound[ev_port])          # a prefix of each port's changes
        fanin = self._carry_f[ev_port] + _within_port_cumsum(ev_port, ev_d)
        demand = self._carry_d[ev_port] + _within_port_cumsum(ev_port, ev_r)
        last = np.flatnonzero(done & ~np.r_[done[1:] & same_next[:-1], False]) if n else np.zeros(0, _I)
        self._carry_f[ev_port[last]] = fanin[last]
        self._carry_d[ev_port[last]] = demand[last]
        keep = ~done
        self._left = (ev_port[keep], ev_t[keep], ev_d[keep], ev_r[keep])
        dur = np.where(same_next, t_next - ev_t, 0.0)
        sel = np.flatnonzero(done & (dur > 0))
        p = ev_port[sel]
        above = (fanin[sel] >= 2) & (demand[sel] > self.cap[p] * (1 + 1e-9))
        return p, above, ev_t[sel], t_next[sel], fanin[sel], demand[sel]

    def _runs(self, segs, final: bool) -> None:
        """Stage 3: incast events (runs of stretches above capacity), with each port's open run."""
        p, ab, t, tn, f, dm = segs
        on = np.flatnonzero(self._run_on)
        r = self._run[on]
        p = np.concatenate([on, p])
        ab = np.concatenate([np.ones(len(on), bool), ab])
        t, tn = np.concatenate([r[:, 0], t]), np.concatenate([r[:, 1], tn])
        f, dm = np.concatenate([r[:, 2], f]), np.concatenate([r[:, 3], dm])
        order = np.argsort(p, kind="stable")   # a port's open run first, then its stretches in time order
        p, ab, t, tn, f, dm = p[order], ab[order], t[order], tn[order], f[order], dm[order]
        self._run_on[p] = False
        idx = np.flatnonzero(ab)
        if len(idx) == 0:
            return
        same_prev = np.r_[False, p[1:] == p[:-1]]
        run_start = ab & ~(np.r_[False, ab[:-1]] & same_prev)
        rid = (np.cumsum(run_start) - 1)[idx]
        cut = np.r_[0, np.flatnonzero(rid[1:] != rid[:-1]) + 1]
        first, lastp = idx[cut], idx[np.r_[cut[1:], len(idx)] - 1]
        fmax = np.maximum.reduceat(f[idx], cut)
        dmax = np.maximum.reduceat(dm[idx], cut)
        followed = np.r_[p[1:] == p[:-1], False][lastp]   # a later stretch of the port ends the run
        shut = followed | final
        if shut.any():
            self._events.append((p[first][shut], t[first][shut], tn[lastp][shut], fmax[shut], dmax[shut]))
        op = ~shut
        ports = p[first][op]
        self._run_on[ports] = True
        self._run[ports] = np.column_stack([t[first][op], tn[lastp][op], fmax[op], dmax[op]])

    # -- round trips -----------------------------------------------------------------------------------
    def _reduce_latencies(self, paths) -> None:
        """The latencies of every port's incidences as counts per (port, latency): each path's latency
        at each of its ports, as many times as flows took the path (counted per path as flows came, one
        bincount per hand-over instead of one entry per incidence)."""
        used = np.flatnonzero(self._path_flows.a[:self._n_paths])
        if paths is None or not len(used):
            return
        fptr, _ = csr_take(paths.ptr, paths.links, used)
        deg = np.diff(fptr)
        pos = np.arange(fptr[-1]) - np.repeat(fptr[:-1] - paths.ptr[used], deg)
        path = np.repeat(used, deg)
        port = paths.links[pos]
        keep = self.is_port[port]
        port, val, cnt = port[keep], self._plat.a[path[keep]], self._path_flows.a[path[keep]]
        order = lex_order((val, port))
        port, val, cnt = port[order], val[order], cnt[order]
        new = np.r_[True, (port[1:] != port[:-1]) | (val[1:] != val[:-1])]
        starts = np.flatnonzero(new)
        self._lat = (port[starts], val[starts], np.add.reduceat(cnt, starts))

    def _median_latency(self, ports: np.ndarray) -> np.ndarray:
        """Median one-way latency of the incidences at each of ``ports`` (mean of the two middle ones for
        an even count, as pandas' median)."""
        lp, lv, lc = self._lat
        out = np.full(len(ports), np.nan)
        for port in np.unique(ports).tolist():
            lo, hi = np.searchsorted(lp, [port, port + 1])
            vals, cum = lv[lo:hi], np.cumsum(lc[lo:hi])
            n = int(cum[-1])
            lo_v = vals[np.searchsorted(cum, (n - 1) // 2, side="right")]
            hi_v = vals[np.searchsorted(cum, n // 2, side="right")]
            out[ports == port] = (lo_v + hi_v) / 2
        return out
