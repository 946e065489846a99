"""``timeline.json``: the replay as a Trace Event Format file that opens whole in Perfetto / chrome://tracing.

Layout (timestamps in µs, ``displayTimeUnit`` ms):

* process 1 "collectives": one thread track per rank; each collective is a complete event (``X``) on the
  track of every member. Ops of one group that overlap without nesting go to a second track of the rank
  ("rank r (overlap 2)") so no complete events overlap on a track (Perfetto would drop them).
* process 2 "flows": every network flow as an async slice (``b`` / ``e``) named after its source GPU;
  flows that overlap get distinct ids, so Perfetto stacks them instead of dropping them.
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

__all__ = ["COUNTER_LINKS", "MAX_TIMELINE_FLOWS", "flow_stride", "lanes", "timeline_events", "write_timeline"]

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


def lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Greedy lane of each interval, so intervals of one lane never overlap (processed in start order).

    Examples
    --------
    >>> lanes(np.array([0.0, 1.0, 2.0, 5.0]), np.array([3.0, 2.0, 4.0, 6.0])).tolist()
    [0, 1, 1, 0]
    """
    order = np.argsort(start, kind="stable")
    free_at: list[float] = []
    out = np.zeros(len(start), dtype=np.int64)
    for i in order.tolist():
        for lane, t in enumerate(free_at):
            if t <= start[i]:
                free_at[lane] = end[i]
                out[i] = lane
                break
        else:
            out[i] = len(free_at)
            free_at.append(end[i])
    return out


def _us(t_s: float) -> float:
    return round(float(t_s) * 1e6, 3)


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
    start, end = log.op_start_s, log.op_end_s
    ok = np.isfinite(start[op_rank["op"].to_numpy()]) & np.isfinite(end[op_rank["op"].to_numpy()])
    op_rank = op_rank[ok]
    names, comms, seqs = coll["op"].to_numpy(), coll["comm"].to_numpy(), coll["seq"].to_numpy()
    nbytes, algos, slow = coll["bytes"].to_numpy(), coll["algo"].to_numpy(), coll["slowdown"].to_numpy(np.float64)
    ideal = coll["ideal_s"].to_numpy(np.float64)
    tracks: set[tuple[int, int]] = set()
    for rank, grp in op_rank.groupby("rank", sort=True):
        ops = grp["op"].to_numpy()
        lane = lanes(start[ops], end[ops])
        for op, ln in zip(ops.tolist(), lane.tolist(), strict=True):
            tid = int(rank) + world * int(ln)
            tracks.add((int(rank), int(ln)))
            bind = op * world + int(rank) + 1
            binds[(op, int(rank))] = bind
            args = {"comm": str(comms[op]), "seq": int(seqs[op]), "bytes": int(nbytes[op]), "algo": str(algos[op])}
            if math.isfinite(slow[op]):
                args["slowdown"] = round(float(slow[op]), 6)
                args["ideal_us"] = round(float(ideal[op]) * 1e6, 3)
            events.append({"ph": "X", "pid": _PID_COLL, "tid": tid, "name": str(names[op]), "cat": "collective",
                           "ts": _us(start[op]), "dur": _us(end[op] - start[op]), "bind_id": bind,
                           "flow_out": True, "args": args})
    meta = [{"ph": "M", "pid": _PID_COLL, "tid": r + world * ln, "name": "thread_name",
             "args": {"name": f"rank {r}" if ln == 0 else f"rank {r} (overlap {ln + 1})"}} for r, ln in sorted(tracks)]
    meta += [{"ph": "M", "pid": _PID_COLL, "tid": r + world * ln, "name": "thread_sort_index",
              "args": {"sort_index": r * 16 + ln}} for r, ln in sorted(tracks)]
    return meta + events, binds


def _flow_events(result, binds: dict, stride: int) -> tuple[list[dict], int]:
    log, names = result.log, result.link_names
    first_src = names["src"].astype(str).to_numpy()
    last_dst = names["dst"].astype(str).to_numpy()
    ptr, plinks = log.paths.ptr, log.paths.links
    a, b = ptr[log.flow_path], ptr[log.flow_path + 1]
    ok = (b > a) & np.isfinite(log.flow_end_s) & np.isfinite(log.flow_start_s)
    idx = np.flatnonzero(ok)[::stride]
    src = first_src[plinks[a[idx]]]
    dst = last_dst[plinks[b[idx] - 1]]
    t0, t1 = log.flow_start_s[idx], log.flow_end_s[idx]
    op_names = result.collectives["op"].to_numpy()
    events: list[dict] = []
    lane = np.zeros(len(idx), dtype=np.int64)
    for s in np.unique(src).tolist():
        m = np.flatnonzero(src == s)
        lane[m] = lanes(t0[m], t1[m])
    # plain Python values, converted once per column (a per-event numpy scalar round is ~10x slower)
    ts0, ts1 = np.round(t0 * 1e6, 3).tolist(), np.round(t1 * 1e6, 3).tolist()
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
        for t, u in zip(sub["t_s"].tolist(), sub["utilization"].tolist(), strict=True):
            events.append({"ph": "C", "pid": _PID_LINK, "name": f"util {link}", "ts": _us(t),
                           "args": {"percent": round(u * 100, 3)}})
        if len(sub):
            events.append({"ph": "C", "pid": _PID_LINK, "name": f"util {link}", "ts": _us(sub["t_s"].max() + width),
                           "args": {"percent": 0.0}})
    return events


def timeline_events(result) -> dict:
    """The whole Trace Event Format document (see the module docstring)."""
    world = int(result.summary.get("world_size") or 1)
    n_flows = int(len(result.log.flow_path))
    stride = flow_stride(n_flows)
    procs = [{"ph": "M", "pid": p, "name": "process_name", "args": {"name": n}}
             for p, n in ((_PID_COLL, "collectives (one track per rank)"), (_PID_FLOW, "flows (by source GPU)"),
                          (_PID_LINK, "hot links (utilisation %)"))]
    procs += [{"ph": "M", "pid": p, "name": "process_sort_index", "args": {"sort_index": p}} for p in (1, 2, 3)]
    coll, binds = _collective_events(result, world)
    flows, written = _flow_events(result, binds, stride)
    other = {"flows_total": n_flows, "flows_written": written, "flow_sampling_stride": stride,
             "sampling": "every flow" if stride == 1 else f"one flow in {stride}, in log order",
             "trace": str(result.summary.get("trace")), "topology": str(result.summary.get("topology"))}
    return {"traceEvents": procs + coll + flows + _counter_events(result), "displayTimeUnit": "ms",
            "otherData": other}


def write_timeline(result, path: str | Path) -> Path:
    """Write ``timeline.json``; return its path."""
    out = Path(path)
    write_text_file(out, json.dumps(timeline_events(result), separators=(",", ":")))  # atomic
    return out
