# ruff: noqa: UP031  (printf-style on purpose: these are nccl-tests' C format strings, kept as printed)
"""nccl-tests output rendered as each nccl-tests version printed it, for the reader's tests.

Each layout follows the printf format strings of NVIDIA/nccl-tests at the commit named in its entry (read in
``git log -p src/common.cu src/util.cu src/*.cu``); the values are computed as nccl-tests computes them
(algbw = bytes / 1e9 / s, busbw = algbw x the op's factor, doc/PERFORMANCE.md). ``render`` returns the text
and the values as printed (what a reader must give back).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field

__all__ = ["LAYOUTS", "WRAPPERS", "Table", "busbw_factor", "render", "render_json", "wrap"]

#: op stem -> busbw factor as a function of the ranks (nccl-tests doc/PERFORMANCE.md)
_FACTORS = {
    "all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n, "gather": lambda n: (n - 1) / n,
    "scatter": lambda n: (n - 1) / n, "broadcast": lambda n: 1.0, "reduce": lambda n: 1.0,
    "sendrecv": lambda n: 1.0,
}
_REDUCING = ("all_reduce", "reduce", "reduce_scatter")
_ROOTED = ("broadcast", "reduce", "gather", "scatter")


def busbw_factor(stem: str, n: int) -> float:
    return _FACTORS[stem](n)


@dataclass
class Table:
    """One test's sweep: op stem, ranks (hosts x GPUs per host), datatype, sizes and out-of-place times."""

    stem: str
    hosts: int
    gpus_per_host: int
    sizes: list[int]
    times_us: list[float]
    type_name: str = "float"
    elem_bytes: int = 4
    root: int = 0
    wrong: int = 0  # 0 data check on; -1 off (-c 0: N/A)
    extra: dict = field(default_factory=dict)

    @property
    def nranks(self) -> int:
        return self.hosts * self.gpus_per_host


def _float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr (src/util.cu, v2.17.6 a62c975 on): the most decimals that fit the width."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def _time_str_v2(t_us: float) -> str:
    """v2.0 (cbe7f65) to v2.17.5: %7.0f from 10 ms, %7.1f from 100 us, else %7.2f."""
    return "%7.0f" % t_us if t_us >= 10000 else "%7.1f" % t_us if t_us >= 100 else "%7.2f" % t_us


# Per layout: (rank line, measurement group, row start, header columns, ms?, whether it prints the program name)
def _group_v1(t, a, b, w):  # v1.0.0 src/common.cu: time in ms
    return ("  %7.3f  %5.2f  %5.2f  %7.0le" % (t / 1000, a, b, 0.0)) if w >= 0 else \
        "  %7.3f  %5.2f  %5.2f  \tN/A" % (t / 1000, a, b)


def _group_v2(t, a, b, w):  # cbe7f65 (2019) .. v2.12: error column %5.0le
    return ("  %7s  %6.2f  %6.2f  %5.0le" % (_time_str_v2(t), a, b, 0.0)) if w >= 0 else \
        "  %7s  %6.2f  %6.2f  %5s" % (_time_str_v2(t), a, b, "N/A")


def _group_v213(t, a, b, w):  # 51af557 (v2.13.0, 2022-08): #wrong %5g
    return ("  %7s  %6.2f  %6.2f  %5g" % (_time_str_v2(t), a, b, w)) if w >= 0 else \
        "  %7s  %6.2f  %6.2f  %5s" % (_time_str_v2(t), a, b, "N/A")


def _group_v2176(t, a, b, w):  # a62c975 (v2.17.6) .. HEAD src/util.cu writeBenchmarkLineBody
    return ("  %7s  %6s  %6s  %6g" % (_float_str(t, 7), _float_str(a, 6), _float_str(b, 6), w)) if w >= 0 else \
        "  %7s  %6s  %6s    N/A" % (_float_str(t, 7), _float_str(a, 6), _float_str(b, 6))


def _group_iter(t, a, b, w):  # 0fdb00a (v2.19.2): -I 1 adds i_min i_max i_p99 i_cv%
    return _group_v2176(t, a, b, w) + "  %7s  %7s  %7s  %7s" % tuple(_float_str(v, 7) for v in (t * .9, t * 1.2,
                                                                                                t * 1.1, 3.5))


_RANK_V1 = "#   Rank %2d on %10s device %2d [0x%02x] %s"                        # v1.0.0
_RANK_V2 = "#  Rank %2d Pid %6d on %10s device %2d [0x%02x] %s"                 # cbe7f65 .. v2.13.12
_RANK_V214 = "#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"  # b4300cc (v2.14.1) on


def _v1_cols(stem: str) -> list[str]:
    """v1.0.0 print_header of each test (src/all_reduce.cu ...): the columns before the measurements."""
    return {"all_reduce": ["bytes", "N", "type", "op"], "reduce_scatter": ["bytes", "N", "type", "op"],
            "all_gather": ["bytes", "N", "type"], "broadcast": ["bytes", "N", "type", "root"],
            "reduce": ["bytes", "N", "type", "op", "root"]}[stem]


def _v2_cols(stem: str) -> list[str]:
    """cbe7f65 (2019) .. v2.12 per-test print_header columns before the measurements."""
    return {"all_reduce": ["size", "count", "type", "redop"], "reduce_scatter": ["size", "count", "type", "redop"],
            "all_gather": ["size", "count", "type"], "broadcast": ["size", "count", "type", "root"],
            "reduce": ["size", "count", "type", "redop", "root"], "alltoall": ["size", "count", "type", "redop"],
            "sendrecv": ["size", "count", "type"]}[stem]


#: layout -> (nccl-tests version/commit it is printed by, ops it has)
LAYOUTS: dict[str, tuple[str, tuple[str, ...]]] = {
    "v1": ("v1.0.0 (2017-2018)", ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")),
    "v2.0": ("cbe7f65 (2019, v2.0.0) .. v2.12", ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce",
                                                "alltoall", "sendrecv")),
    "v2.13": ("51af557 (v2.13.0, 2022)", tuple(_FACTORS)),
    "v2.13-cputime": ("d313d20 (v2.13.4) -C 1", tuple(_FACTORS)),
    "v2.17.6": ("a62c975 (v2.17.6, 2025) .. v2.19", tuple(_FACTORS)),
    "v2.18.5-timestamp": ("4500d26 (v2.18.5) -S 1", tuple(_FACTORS)),
    "v2.19.2-per-iter": ("0fdb00a (v2.19.2) -I 1", tuple(_FACTORS)),
}


def _values(t: Table, k: int) -> tuple[float, float, float]:
    sec = t.times_us[k] * 1e-6
    algbw = t.sizes[k] / 1e9 / sec
    return t.times_us[k], algbw, algbw * busbw_factor(t.stem, t.nranks)


def _rank_lines(t: Table, layout: str) -> list[str]:
    out = ["# Using devices"]
    for r in range(t.nranks):
        host, dev = f"node{r // t.gpus_per_host:03d}", r % t.gpus_per_host
        if layout == "v1":
            out.append(_RANK_V1 % (r, host, dev, 16 + dev, "Tesla V100-SXM2-32GB"))
        elif layout in ("v2.0", "v2.13", "v2.13-cputime"):
            out.append(_RANK_V2 % (r, 1000 + r, host, dev, 16 + dev, "NVIDIA A100-SXM4-80GB"))
        else:
            out.append(_RANK_V214 % (r, 0, 1000 + r, host, dev, 0, 16 + dev, 0, "NVIDIA H100 80GB HBM3"))
    return out


def render(t: Table, layout: str) -> tuple[str, dict]:
    """The stdout of one run in ``layout`` and the printed values (sizes, out-of-place time in us, busbw)."""
    group = {"v1": _group_v1, "v2.0": _group_v2, "v2.13": _group_v213, "v2.13-cputime": _group_v213,
             "v2.17.6": _group_v2176, "v2.18.5-timestamp": _group_v2176, "v2.19.2-per-iter": _group_iter}[layout]
    in_place = not (layout == "v1" and t.stem == "broadcast")  # v1 broadcast: out-of-place only
    lines = [f"$ mpirun -np {t.nranks} ./build/{t.stem}_perf -b 8 -e 8G -f 2 -g 1"]
    if layout in ("v2.17.6", "v2.18.5-timestamp", "v2.19.2-per-iter"):  # dafb704 (v2.16.7) prints the name
        lines += ["# nccl-tests version 2.19.6 nccl-headers=22903 nccl-library=22903",
                  f"# Collective test starting: {t.stem}_perf"]
    lines += [("" if layout == "v1" else "# ") + "nThread 1 nGpus 1 minBytes 8 maxBytes 8589934592 step: 2(factor) "
              "warmup iters: 5 iters: 20 validation: 1", "#"] + _rank_lines(t, layout)
    time_col = "cputime" if layout == "v2.13-cputime" else "time"
    if layout == "v1":
        pre = _v1_cols(t.stem)
        meas = ["time", "algbw", "busbw", "res"]
    elif layout == "v2.0":
        pre, meas = _v2_cols(t.stem), ["time", "algbw", "busbw", "error"]
    else:
        pre = ["size", "count", "type", "redop", "root"]
        meas = [time_col, "algbw", "busbw", "#wrong"] + (["i_min", "i_max", "i_p99", "i_cv%"]
                                                         if layout == "v2.19.2-per-iter" else [])
    cols = pre + meas + (meas if in_place else []) + (["timestamp"] if layout == "v2.18.5-timestamp" else [])
    lines += ["#", "#" + "".join(f"  {c:>8}" for c in cols)]
    if layout != "v1":
        lines.append("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)")
    want = dict(size=[], time_us=[], busbw=[], busbw_inplace=[])
    bws = []
    for k, size in enumerate(t.sizes):
        time_us, algbw, busbw = _values(t, k)
        fields = {"bytes": size, "size": size, "N": size // t.elem_bytes, "count": size // t.elem_bytes,
                  "type": t.type_name, "op": "sum", "redop": "sum" if t.stem in _REDUCING else "none",
                  "root": t.root if t.stem in _ROOTED else -1}
        line = "".join(f"{fields[c]:>12}  " if c in ("bytes", "size", "N", "count") else f"{fields[c]:>6}  "
                       for c in pre).rstrip()
        line += group(time_us, algbw, busbw, t.wrong)
        if in_place:
            line += group(time_us * 1.01, algbw / 1.01, busbw / 1.01, t.wrong)
        if layout == "v2.18.5-timestamp":
            line += "%21s" % "2026-12-02 01:45:07"
        lines.append(line)
        toks = line.split()
        at = len(pre)
        scale = 1000.0 if layout == "v1" else 1.0
        want["size"].append(size)
        want["time_us"].append(float(toks[at]) * scale)
        want["busbw"].append(float(toks[at + 2]))
        want["busbw_inplace"].append(float(toks[at + len(meas) + 2]) if in_place else math.nan)
        bws += [busbw] + ([busbw / 1.01] if in_place else [])
    footer = ("" if layout == "v1" else "#") + " %-20s : %d %s" % ("Out of bounds values", 0, "OK")
    lines += [footer, ("" if layout == "v1" else "#") + " %-20s : %g " % ("Avg bus bandwidth", sum(bws) / len(bws)),
              "#"]
    return "\n".join(lines) + "\n", want


def render_json(t: Table) -> tuple[str, dict]:
    """The ``-J`` file of one run (ad956f1, v2.18.5; file version 3) and its values."""
    results, want = [], dict(size=[], time_us=[], busbw=[], busbw_inplace=[])
    for k, size in enumerate(t.sizes):
        time_us, algbw, busbw = _values(t, k)
        results.append({"size": size, "count": size // t.elem_bytes, "type": t.type_name,
                        "redop": "sum" if t.stem in _REDUCING else "none",
                        "root": "%6i" % (t.root if t.stem in _ROOTED else -1),
                        "out_of_place": {"time": time_us, "alg_bw": algbw, "bus_bw": busbw, "nwrong": 0},
                        "in_place": {"time": time_us * 1.01, "alg_bw": algbw / 1.01, "bus_bw": busbw / 1.01,
                                     "nwrong": None},
                        "actual_iterations": 20, "experiment_name": ""})
        for key, v in (("size", size), ("time_us", time_us), ("busbw", busbw), ("busbw_inplace", busbw / 1.01)):
            want[key].append(v)
    devices = [{"rank": r, "group": 0, "pid": 1000 + r, "hostname": f"node{r // t.gpus_per_host:03d}",
                "device": r % t.gpus_per_host, "device_hex": "0000:18:00", "device_info": "NVIDIA H100 80GB HBM3"}
               for r in range(t.nranks)]
    doc = {"version": 3, "start_time": "2026-12-02 01:45:00", "args": [f"./build/{t.stem}_perf", "-J", "r.json"],
           "env": ["PATH=/usr/bin"], "nccl_version": 22903,
           "config": {"nthreads": 1, "ngpus": 1, "devices": devices}, "results": results,
           "out_of_bounds": {"count": 0, "okay": True}, "errors": [], "end_time": "2026-12-02 01:46:00"}
    return json.dumps(doc), want


#: launcher / log-collector wrapper -> what it puts around each line (see docs/formats.md)
WRAPPERS: dict[str, object] = {
    "plain": lambda s: s,
    "ompi_tag": lambda s: "[1,0]<stdout>:" + s,                           # mpirun --tag-output (Open MPI 4)
    "prrte_fullname": lambda s: "[prterun-h1-4242@1,0]<stdout>: " + s,   # Open MPI 5 --output tag-fullname
    "prrte_timestamp": lambda s: "[Wed Dec  2 01:45:07 2026]<stdout>: " + s,  # --output timestamp / --timestamp-output
    "srun_l": lambda s: "0: " + s,                                        # srun -l
    "srun_l_padded": lambda s: " 0: " + s,                                # srun -l with 10+ tasks
    "mpich_l": lambda s: "[0] " + s,                                      # mpiexec -l (MPICH, Intel MPI)
    "pdsh": lambda s: "gpu-node-07: " + s,                                # pdsh / clush
    "pdsh_ip": lambda s: "10.0.3.17: " + s,                               # pdsh -w on IP addresses
    "kubectl": lambda s: "2026-12-02T01:45:07.123456789Z " + s,           # kubectl logs --timestamps
    "docker_offset": lambda s: "2026-12-02T01:45:07.123456+01:00 " + s,   # docker logs -t (RFC 3339)
    "stacked": lambda s: "2026-12-02T01:45:07Z [1,0]<stdout>:" + s,       # kubectl around mpirun --tag-output
    "ansi": lambda s: "\x1b[32m" + s + "\x1b[0m",                         # colouring wrappers
    "tabs": lambda s: "\t".join(s.split("  ")),
}


def wrap(text: str, wrapper: str, crlf: bool = False) -> str:
    """``text`` with every line wrapped (and CRLF line ends if asked)."""
    fn = WRAPPERS[wrapper]
    return ("\r\n" if crlf else "\n").join(fn(line) for line in text.splitlines()) + "\n"
