"""``timeline.json``: the replay as a Trace Event Format file that opens whole in Perfetto / chrome://tracing.

Layout (timestamps in µs with at most three decimals, i.e. whole nanoseconds, the resolution Perfetto keeps,
so tracks are laid out on the times it will see; ``displayTimeUnit`` ms):

* process 1 "collectives": one thread track per rank; each collective is a complete event (``X``) on the
  track of every member. Ops of one group that overlap without nesting go to a second track of the rank
  ("rank r (overlap 2)") so no complete events overlap on a track (Perfetto would drop them, or in recent
  versions move them to an overflow track and flag an import error).
* process 2 "flows": every network flow as an async slice (``b`` / ``e``) named after its source GPU;
  flows that overlap, or touch, get distinct ids (one id per lane), so every id's slices follow one another
  strictly and Perfetto stacks the lanes instead of dropping or mis-pairing slices.
* flow arrows (``bind_id`` with ``flow_out`` on the collective, ``flow_in`` on each of its flows) from a
  collective on the sender's rank track to every flow that rank sends for it.
* process 3 "hot links": a counter track per hottest link (utilisation % of line rate per time bin).

Byte counts are integers. Past :data:`MAX_TIMELINE_FLOWS` flows, every k-th flow is kept (k the smallest
stride that fits); ``otherData`` states the totals and the stride.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from traces.atomic import write_text_file

__all__ = ["COUNTER_LINKS", "MAX_TIMELINE_FLOWS", "flow_stride", "lanes", "ns", "timeline_events", "timeline_sampling",
           "write_timeline"]

#: Most flows written; beyond it a regular sample (stride) is written and the file says so.
MAX_TIMELINE_FLOWS = 60_000
#: Hottest links (time above 90 %, then peak) that get a utilisation counter track.
COUNTER_LINKS = 8
_PID_COLL, _PID_FLOW, _PID_LINK = 1, 2, 3


def flow_stride(n_flows: int, limit: int | None = None) -> int:
    """Keep every k-th flow so that at most ``limit`` (default :data:`MAX_TIMELINE_FLOWS`) remain.

    Examples
    --------
    >>> flow_stride(10, 20), flow_stride(100, 20), flow_stride(101, 20)
    (1, 5, 6)
    """
    limit = MAX_TIMELINE_FLOWS if limit is None else limit
    return max(1, math.ceil(n_flows / max(limit, 1)))


def lanes(start: np.ndarray, end: np.ndarray, touch: bool = True) -> np.ndarray:
    """Greedy lane of each interval, so intervals of one lane never overlap (processed in start order).

    ``touch``: an interval may start on a lane at the instant the previous one ends (complete events); with
    ``touch=False`` it must start strictly later (async slices: an end and a begin at one timestamp on one id
    would depend on the loader's order for equal timestamps).

    Examples
    --------
    >>> lanes(np.array([0.0, 1.0, 2.0, 5.0]), np.array([3.0, 2.0, 4.0, 6.0])).tolist()
    [0, 1, 1, 0]
    >>> lanes(np.array([0.0, 2.0]), np.array([2.0, 3.0]), touch=False).tolist()
    [0, 1]
    """
    order = np.argsort(start, kind="stable")
    free_at: list[float] = []
    out = np.zeros(len(start), dtype=np.int64)
    for i in order.tolist():
        for lane, t in enumerate(free_at):
            if t < start[i] or (touch and t == start[i]):
                free_at[lane] = end[i]
                out[i] = lane
                break
        else:
            out[i] = len(free_at)
            free_at.append(end[i])
    return out


def ns(t_s) -> np.ndarray:
    """Times in whole nanoseconds (int64): the resolution a loader keeps of ``ts`` in µs (Perfetto rounds
    ``ts * 1000`` to an integer), so tracks are laid out on exactly the times it will see.

    Examples
    --------
    >>> ns(np.array([1.0000004e-6, 2.5e-9])).tolist()
    [1000, 2]
    """
    return np.rint(np.asarray(t_s, np.float64) * 1e9).astype(np.int64)


def _us(t_ns: int) -> float:
    """A whole-nanosecond time as µs with at most three decimals (exact back to the nanosecond)."""
    return int(t_ns) / 1000


def _rank_tid(rank: int, lane: int, world: int) -> int:
    """The thread id of a rank's track (``lane`` > 0: its overflow tracks for overlapping collectives).

    Never 0: Perfetto's JSON importer reads ``tid`` 0 as "not set" and puts the events on the process's main
    thread (``tid == pid``), which merged rank 0's track into rank 1's (found by loading the file in
    trace_processor_shell).
    """
    return 1 + rank + world * lane


def _collective_events(result, world: int) -> tuple[list[dict], dict[tuple[int, int], int]]:
    """Complete events per member rank, and the bind id of each (op, rank) for arrows."""
    coll, log = result.collectives, result.log
    w = log.workload
    events: list[dict] = []
    binds: dict[tuple[int, int], int] = {}
    if w is None:
        return events, binds
    step_rank = np.repeat(np.arange(len(w.prog_ptr) - 1), np.diff(w.prog_ptr))
    op_rank = pd.DataFrame({"op": w.step_op_idx,
                            "rank": np.repeat(step_rank, np.diff(w.step_op_ptr))}).drop_duplicates()
    ok = np.isfinite(log.op_start_s) & np.isfinite(log.op_end_s)
    op_rank = op_rank[ok[op_rank["op"].to_numpy()]]
    start = ns(np.where(ok, log.op_start_s, 0.0))
    end = np.maximum(ns(np.where(ok, log.op_end_s, 0.0)), start)
    names, comms, seqs = coll["op"].to_numpy(), coll["comm"].to_numpy(), coll["seq"].to_numpy()
    nbytes, algos, slow = coll["bytes"].to_numpy(), coll["algo"].to_numpy(), coll["slowdown"].to_numpy(np.float64)
    ideal = coll["ideal_s"].to_numpy(np.float64)
    tracks: set[tuple[int, int]] = set()
    for rank, grp in op_rank.groupby("rank", sort=True):
        ops = grp["op"].to_numpy()
        lane = lanes(start[ops], end[ops])
        for op, ln in zip(ops.tolist(), lane.tolist(), strict=True):
            tid = _rank_tid(int(rank), int(ln), world)
            tracks.add((int(rank), int(ln)))
            bind = op * world + int(rank) + 1
            binds[(op, int(rank))] = bind
            args = {"comm": str(comms[op]), "seq": int(seqs[op]), "bytes": int(nbytes[op]), "algo": str(algos[op])}
            if math.isfinite(slow[op]) and math.isfinite(ideal[op]):
                args["slowdown"] = round(float(slow[op]), 6)
                args["ideal_us"] = round(float(ideal[op]) * 1e6, 3)
            events.append({"ph": "X", "pid": _PID_COLL, "tid": tid, "name": str(names[op]), "cat": "collective",
                           "ts": _us(start[op]), "dur": _us(end[op] - start[op]), "bind_id": bind,
                           "flow_out": True, "args": args})
    meta = [{"ph": "M", "pid": _PID_COLL, "tid": _rank_tid(r, ln, world), "name": "thread_name",
             "args": {"name": f"rank {r}" if ln == 0 else f"rank {r} (overlap {ln + 1})"}} for r, ln in sorted(tracks)]
    meta += [{"ph": "M", "pid": _PID_COLL, "tid": _rank_tid(r, ln, world), "name": "thread_sort_index",
              "args": {"sort_index": r * 16 + ln}} for r, ln in sorted(tracks)]
    return meta + events, binds


def _placeable(log) -> np.ndarray:
    """Logged flows that can be drawn: a network path and finite start and end times."""
    ptr = log.paths.ptr
    a, b = ptr[log.flow_path], ptr[log.flow_path + 1]
    return (b > a) & np.isfinite(log.flow_end_s) & np.isfinite(log.flow_start_s)


def timeline_sampling(result) -> dict | None:
    """What ``timeline.json`` holds of the flows, as its ``otherData`` states it (``None`` without a log).

    The engine logs every flow or every k-th (``log.flow_stride``); past :data:`MAX_TIMELINE_FLOWS` logged
    flows every j-th of those is written, so the file's stride is k * j. The terminal prints this same
    statement, so the line and the file cannot disagree. ``flows_skipped`` counts logged flows left out
    because they have no network path or no finite start / end.

    Parameters
    ----------
    result : sim.results.result.Result
        A replay's result; its ``log`` holds the logged flows (analytical results have none).

    Returns
    -------
    dict or None
        ``flows_total``, ``flows_written``, ``flows_skipped``, ``flow_sampling_stride``, ``sampling``.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> timeline_sampling(SimpleNamespace(log=None)) is None
    True
    """
    log = getattr(result, "log", None)
    if log is None:
        return None
    n_flows = int(getattr(log, "n_flows", len(log.flow_path)))
    kept_stride = max(1, int(getattr(log, "flow_stride", 1)))
    sub = flow_stride(len(log.flow_path))
    ok = _placeable(log)
    stride = kept_stride * sub
    return {"flows_total": n_flows, "flows_written": len(range(0, int(ok.sum()), sub)),
            "flows_skipped": int((~ok).sum()), "flow_sampling_stride": stride,
            "sampling": "every flow" if stride == 1 else f"one flow in {stride}, in log order"}


def _flow_events(result, binds: dict, stride: int) -> tuple[list[dict], int]:
    log, names = result.log, result.link_names
    first_src = names["src"].astype(str).to_numpy()
    last_dst = names["dst"].astype(str).to_numpy()
    ptr, plinks = log.paths.ptr, log.paths.links
    a, b = ptr[log.flow_path], ptr[log.flow_path + 1]
    idx = np.flatnonzero(_placeable(log))[::stride]
    src = first_src[plinks[a[idx]]]
    dst = last_dst[plinks[b[idx] - 1]]
    t0 = ns(log.flow_start_s[idx])
    t1 = np.maximum(ns(log.flow_end_s[idx]), t0)
    op_names = result.collectives["op"].to_numpy()
    events: list[dict] = []
    lane = np.zeros(len(idx), dtype=np.int64)
    for s in np.unique(src).tolist():
        m = np.flatnonzero(src == s)
        lane[m] = lanes(t0[m], t1[m], touch=False)
    # plain Python values, converted once per column (a per-event numpy scalar conversion is ~10x slower)
    ts0, ts1 = (t0 / 1000).tolist(), (t1 / 1000).tolist()
    ops = log.flow_op[idx].astype(np.int64).tolist()
    nbytes = np.rint(log.flow_bytes[idx]).astype(np.int64).tolist()
    srcs, dsts, lane_l = src.tolist(), dst.tolist(), lane.tolist()
    for k in range(len(idx)):
        op, s = ops[k], srcs[k]
        fid = f"{s}/{lane_l[k]}"
        begin = {"ph": "b", "pid": _PID_FLOW, "tid": 0, "cat": "flow", "name": s, "id": fid, "ts": ts0[k],
                 "args": {"dst": dsts[k], "bytes": nbytes[k], "op": str(op_names[op]), "op_id": op}}
        rank = int(s[3:]) if s.startswith("gpu") and s[3:].isdigit() else -1
        bind = binds.get((op, rank))
        if bind is not None:
            begin["bind_id"] = bind
            begin["flow_in"] = True
        events.append(begin)
        events.append({"ph": "e", "pid": _PID_FLOW, "tid": 0, "cat": "flow", "name": s, "id": fid, "ts": ts1[k]})
    return events, len(idx)


def _counter_events(result) -> list[dict]:
    links, ts = result.links, result.link_timeseries
    used = links[links["bytes"] > 0]
    if not len(used) or not len(ts):
        return []
    used = used.assign(link=used["src"].astype(str) + "->" + used["dst"].astype(str))
    top = used.sort_values(["busy_above_90_s", "peak_utilization", "bytes", "link"],
                           ascending=[False, False, False, True]).head(COUNTER_LINKS)["link"].tolist()
    key = (ts["src"].astype(str) + "->" + ts["dst"].astype(str)).to_numpy()
    width = float(result.summary.get("bin_s") or 0.0)
    events = []
    for link in top:
        sub = ts[key == link].sort_values("t_s")
        sub = sub[np.isfinite(sub["utilization"].to_numpy(np.float64))]   # JSON has no NaN
        for t, u in zip(ns(sub["t_s"].to_numpy()).tolist(), sub["utilization"].tolist(), strict=True):
            events.append({"ph": "C", "pid": _PID_LINK, "name": f"util {link}", "ts": _us(t),
                           "args": {"percent": round(u * 100, 3)}})
        if len(sub):
            events.append({"ph": "C", "pid": _PID_LINK, "name": f"util {link}",
                           "ts": _us(int(ns(sub["t_s"].max() + width))), "args": {"percent": 0.0}})
    return events


def timeline_events(result) -> dict:
    """The whole Trace Event Format document (see the module docstring)."""
    world = int(result.summary.get("world_size") or 1)
    sampling = timeline_sampling(result)
    # the engine hands over every flow (stride 1) or every k-th in finishing order: sample that again
    sub = flow_stride(len(result.log.flow_path))
    procs = [{"ph": "M", "pid": p, "name": "process_name", "args": {"name": n}}
             for p, n in ((_PID_COLL, "collectives (one track per rank)"), (_PID_FLOW, "flows (by source GPU)"),
                          (_PID_LINK, "hot links (utilisation %)"))]
    procs += [{"ph": "M", "pid": p, "name": "process_sort_index", "args": {"sort_index": p}} for p in (1, 2, 3)]
    coll, binds = _collective_events(result, world)
    flows, written = _flow_events(result, binds, sub)
    assert written == sampling["flows_written"]   # the statement is computed apart from the events
    other = {**sampling, "trace": str(result.summary.get("trace")), "topology": str(result.summary.get("topology"))}
    return {"traceEvents": procs + coll + flows + _counter_events(result), "displayTimeUnit": "ms",
            "otherData": other}


def write_timeline(result, path: str | Path) -> Path:
    """Write ``timeline.json``; return its path."""
    out = Path(path)
    # allow_nan=False: NaN / Infinity are not JSON, and one would make a loader refuse the whole file
    write_text_file(out, json.dumps(timeline_events(result), separators=(",", ":"), allow_nan=False))  # atomic
    return out
