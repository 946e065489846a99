"""CPU time and memory of the flow tier phase by phase: trace read, setup, reference bound, replay, result.

    python benchmarks/bench_phases.py TRACE [--topo fat_tree] [--quantile 0.01] [--no-memo]

Prints, after each phase of ``sim.simulate`` (one process, one run), the CPU time so far, the resident
set and the phase's own peak (Linux: the peak is reset between phases through ``/proc/self/clear_refs``),
then the run's flows, network events, makespan and memo figures. Run it on the decode-step traces that
``benchmarks/bench_scale.py`` caches (``/tmp/collsim-bench-scale/ds_v3_decode_{64,256,1024}.parquet``).
"""

from __future__ import annotations

import argparse
import time

_T0 = time.process_time()


def _status() -> dict[str, float]:
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(("VmRSS", "VmHWM")):
                key, val = line.split(":")
                out[key] = int(val.split()[0]) / 1e6
    return out


def mark(name: str) -> None:
    """Print the figures of the phase that just ended and reset the peak for the next one."""
    st = _status()
    print(f"{name:22s} cpu {time.process_time() - _T0:8.2f} s   rss {st['VmRSS']:6.3f} GB   "
          f"phase peak {st['VmHWM']:6.3f} GB", flush=True)
    try:
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")
    except OSError:   # not Linux or not allowed: the peaks are then running peaks
        pass


def _wrap(module, name: str, label: str) -> None:
    fn = getattr(module, name)

    def timed(*args, **kwargs):
        out = fn(*args, **kwargs)
        mark(label)
        return out

    setattr(module, name, timed)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace")
    ap.add_argument("--topo", default="fat_tree")
    ap.add_argument("--quantile", type=float, default=0.01)
    ap.add_argument("--no-memo", action="store_true")
    args = ap.parse_args()
    import sim.replay as replay
    import sim.results.build as build
    from traces import read_trace

    mark("imports")
    df = read_trace(args.trace)
    mark("read_trace")
    _wrap(replay, "setup_replay", "setup_replay")
    _wrap(replay, "reference_durations", "reference bound")
    _wrap(replay, "run_engine", "replay (engine)")
    _wrap(build, "build_result", "result tables")
    res = replay.simulate(df, args.topo, completion_quantile=args.quantile, memoize=not args.no_memo)
    s = res.summary
    print(f"flows {s['flows']:,}  network events {s.get('network_events')}  makespan {s['makespan_s']!r} s  "
          f"memo hits {s.get('memo_hits')}  records {s.get('memo_records')}")


if __name__ == "__main__":
    main()
