"""The reference of ``ideal_s`` and ``ideal_makespan_s``: a proven lower bound on every fabric.

The reference fabric (:func:`topologies.builders.ideal.reference_ports`) keeps each server's GPUs, NVLink
and NICs as built and replaces the network by a non-blocking core; any GPU may reach the core through any
NIC of its NVLink domain (over NVLink, as NCCL's PXN does). On it, each collective's plan (the transfers the
flow tier runs) takes at least the larger of two times, whatever the rates:

``critical path``
    the longest chain of the plan's DAG where transfer ``t`` weighs ``delay_s + bytes / R_t + L_t``
    (``L_t`` as the replay pays it: :func:`sim.planning.plan_latency.paid_path_latency_s`).
    ``R_t`` is the fastest any route can carry it: between domains ``min(out_s, in_d)`` with
    ``out_s = max(NIC_s, min(NVLink_s, largest other NIC of the domain))`` (its own NICs, or NVLink to a
    relay GPU and that GPU's NICs; ``in_d`` likewise), inside a domain ``min(NVLink_s, NVLink_d)``.
    ``L_t`` is the smallest path latency: the two domains' smallest NIC latencies, or the two NVLink hops.
``port load``
    for every port, ``smallest delay + bytes through it / its capacity + smallest latency``, over the ports
    every route must use: a GPU's NVLink out (in) for its traffic inside its domain, all of a GPU's links
    out (in) for all of its traffic, and a domain's NICs together for all traffic leaving (entering) it.

A fabric (any preset, routing, failed or slowed links: anomalies only remove or narrow cables) only
removes or narrows what these bounds allow, so every collective's flow-tier duration is at least its
``ideal_s``. (A user process, ``SimOptions.processes``, that raises a capacity above nominal is outside
this guarantee.) The flow tier shares bandwidth max-min
fairly, which is not monotone (more capacity for one flow can slow another), so a *replay* on an ideal
fabric is not a bound; this is. The rank programs run with these durations
(:func:`sim.analytical.tier.schedule`) give ``ideal_makespan_s``: every op starts no earlier and ends no
earlier on any fabric, so the makespan is at least that too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.planning.plan import LEG_DOWN, LEG_PATH, LEG_UP
from sim.planning.plan_latency import paid_path_latency_s
from topologies.builders.ideal import ReferencePorts

__all__ = ["IdealLog", "ReferenceModel", "issue_times", "plan_bound_s"]


class ReferenceModel:
    """Port capacities, per-transfer rate and latency bounds of the reference fabric.

    Ports (index of ``capacity_bytes_per_s``): ``0..G-1`` NVLink out of each GPU, ``G..2G-1`` NVLink in,
    ``2G..3G-1`` everything out of a GPU (NVLink and NICs), ``3G..4G-1`` everything in, then one port per
    domain for the NICs out of it, and one per domain for the NICs into it.

    Parameters
    ----------
    ports : topologies.builders.ideal.ReferencePorts

    Examples
    --------
    A 2 x 2 server pair, 8 GB/s NICs (64 Gb/s) and 32 GB/s NVLink: one GPU's transfer across servers runs at
    one NIC's rate, but the NICs of its server serve it together.

    >>> from topologies import leaf_spine
    >>> from topologies.builders.ideal import reference_ports
    >>> m = ReferenceModel(reference_ports(leaf_spine(4, gpus_per_server=2, link_gbps=64.0, nvlink_gbps=256.0)))
    >>> load, spb, lat = m.loads(np.array([0]), np.array([2]), np.array([8e9]))
    >>> round(float(1 / spb[0])), float(load[m.domain_out(0)]), float(m.capacity_bytes_per_s[m.domain_out(0)])
    (8000000000, 8000000000.0, 16000000000.0)
    """

    def __init__(self, ports: ReferencePorts) -> None:
        self.ports = ports
        g = self.gpus = ports.num_gpus
        self.domain = ports.domain
        self.n_domains = int(ports.domain.max()) + 1 if g else 0
        nvl = ports.nvlink_gbps * 1e9 / 8
        net = ports.net_gbps * 1e9 / 8
        dom_net = np.bincount(self.domain, weights=net, minlength=self.n_domains)
        self.capacity_bytes_per_s = np.concatenate([nvl, nvl, nvl + net, nvl + net, dom_net, dom_net])
        # the largest NIC of each GPU's domain other than its own: where NVLink can relay its traffic
        others = np.zeros(g)
        for d in range(self.n_domains):
            members = np.flatnonzero(self.domain == d)
            if len(members) > 1:
                order = np.sort(net[members])
                top, second = order[-1], order[-2]
                others[members] = np.where(net[members] == top, second, top)
        self.net_rate = np.maximum(net, np.minimum(nvl, others))   # fastest network rate of one transfer
        self.nvl_rate = nvl
        dom_lat = np.full(self.n_domains, np.inf)
        has_nic = ports.net_gbps > 0
        np.minimum.at(dom_lat, self.domain[has_nic], ports.net_latency_us[has_nic])
        self.dom_lat_s = np.where(np.isfinite(dom_lat), dom_lat, 0.0) * 1e-6
        self.nvl_lat_s = ports.nvlink_latency_us * 1e-6
        self.direct = ports.gpu_to_gpu_nvlink

    def domain_out(self, gpu: int) -> int:
        """Port index of the NICs out of ``gpu``'s domain."""
        return 4 * self.gpus + int(self.domain[gpu])

    def loads(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bytes per port, and each transfer's seconds per byte at its fastest and its smallest latency.

        Parameters
        ----------
        src, dst : ndarray of int
            GPU slots of transfers (``src != dst``).
        nbytes : ndarray of float

        Returns
        -------
        load_bytes : ndarray
            Per port (see the class docstring).
        s_per_byte : ndarray
            ``1 / R_t``.
        latency_s : ndarray
            ``L_t``.
        """
        g, nd = self.gpus, self.n_domains
        ds, dd = self.domain[src], self.domain[dst]
        intra = ds == dd
        nb = np.asarray(nbytes, np.float64)
        size = 4 * g + 2 * nd
        load = (np.bincount(src[intra], weights=nb[intra], minlength=size)
                + np.bincount(g + dst[intra], weights=nb[intra], minlength=size)
                + np.bincount(2 * g + src, weights=nb, minlength=size)
                + np.bincount(3 * g + dst, weights=nb, minlength=size)
                + np.bincount(4 * g + ds[~intra], weights=nb[~intra], minlength=size)
                + np.bincount(4 * g + nd + dd[~intra], weights=nb[~intra], minlength=size))
        rate = np.where(intra, np.minimum(self.nvl_rate[src], self.nvl_rate[dst]),
                        np.minimum(self.net_rate[src], self.net_rate[dst]))
        with np.errstate(divide="ignore"):
            spb = 1.0 / rate
        two_hops = self.nvl_lat_s[src] + self.nvl_lat_s[dst]
        one_hop = np.maximum(self.nvl_lat_s[src], self.nvl_lat_s[dst])   # a GPU-GPU cable: one NVLink link
        nv_lat = np.where(self.direct[src] | self.direct[dst], one_hop, two_hops)
        lat = np.where(intra, nv_lat, self.dom_lat_s[ds] + self.dom_lat_s[dd])
        return load, spb, lat


def plan_bound_s(plan, model: ReferenceModel) -> float:
    """``ideal_s`` of one transfer plan: the larger of its critical path and its busiest port on the reference.

    Examples
    --------
    >>> from sim.planning.collectives import plan_collective
    >>> from topologies import fat_tree
    >>> from topologies.builders.ideal import reference_ports
    >>> g = fat_tree(4, num_gpus=4, gpus_per_server=1, link_gbps=80.0, latency_us=0.0)
    >>> plan = plan_collective("AllToAll", 10**9, [0, 1, 2, 3], algo="direct", graph=g)
    >>> bound = plan_bound_s(plan, ReferenceModel(reference_ports(g)))
    >>> round(bound - float(plan.delay_s.min()), 9)   # 3 GB out of a 10 GB/s NIC, after the software delay
    0.3
    """
    from sim.analytical.bounds import op_time_s

    src, dst = np.asarray(plan.src, np.int64), np.asarray(plan.dst, np.int64)
    n = len(src)
    if n == 0:
        return 0.0
    nbytes = np.asarray(plan.bytes, np.float64)
    delay = np.asarray(plan.delay_s, np.float64)
    spb, lat = np.zeros(n), np.zeros(n)
    leg = np.zeros(n, np.int8) if getattr(plan, "leg", None) is None else np.asarray(plan.leg)
    remote = (src != dst) & (leg == LEG_PATH)
    load, spb[remote], lat[remote] = model.loads(src[remote], dst[remote], nbytes[remote])
    # NVLS legs (GPU -> NVSwitch, NVSwitch -> GPU) each cross the GPU's one NVLink link: its NVLink out (in)
    # port and all of its links out (in), at the GPU's NVLink rate, one NVLink hop
    g = model.gpus
    load = load.astype(np.float64)   # (bincount of no transfers is integer)
    for kind, gpu, base in ((LEG_UP, src, 0), (LEG_DOWN, dst, g)):
        sel = leg == kind
        if sel.any():
            who = gpu[sel]
            load += np.bincount(base + who, weights=nbytes[sel], minlength=load.size)
            load += np.bincount(2 * g + base + who, weights=nbytes[sel], minlength=load.size)
            with np.errstate(divide="ignore"):
                spb[sel] = 1.0 / model.nvl_rate[who]
            lat[sel] = model.nvl_lat_s[who]
    # the propagation a transfer pays beyond its step latency, as the replay charges it (monotone in the
    # path latency, so the smallest latency still bounds every fabric)
    lat = paid_path_latency_s(lat, delay, getattr(plan, "chunk", None))
    return op_time_s(delay, nbytes, spb, lat, np.asarray(plan.dep_ptr, np.int64), np.asarray(plan.dep_idx, np.int64),
                     load, model.capacity_bytes_per_s)[0]


def issue_times(workload, op_end_s: np.ndarray, timing: str) -> np.ndarray:
    """When each step is issued, given every op's end: the engine's rule (``gaps``: previous step done plus
    its gap; ``trace``: not before the recorded time either; ``asap``: previous step done), plus the
    program's straggler delay.

    Examples
    --------
    >>> from sim.engine.workload import Workload
    >>> w = Workload(n_ops=2, op_key=[None, None], prog_ptr=np.array([0, 2]), prog_delay_s=np.zeros(1),
    ...              step_op_ptr=np.array([0, 1, 2]), step_op_idx=np.array([0, 1]),
    ...              step_t_start_s=np.array([1.0, 5.0]), step_gap_s=np.array([0.0, 0.5]))
    >>> issue_times(w, np.array([2.0, 6.0]), "gaps").tolist(), issue_times(w, np.array([2.0, 6.0]), "trace").tolist()
    ([1.0, 2.5], [1.0, 5.0])
    """
    n = workload.n_steps
    if n == 0:
        return np.zeros(0)
    done = np.maximum.reduceat(np.asarray(op_end_s, np.float64)[workload.step_op_idx], workload.step_op_ptr[:-1])
    prev = np.r_[np.nan, done[:-1]]
    first = np.zeros(n, dtype=bool)
    first[workload.prog_ptr[:-1][np.diff(workload.prog_ptr) > 0]] = True
    t0 = np.asarray(workload.step_t_start_s, np.float64)
    after = prev + np.asarray(workload.step_gap_s, np.float64)
    if timing == "gaps":
        t = np.where(first, t0, after)
    elif timing == "trace":
        t = np.where(first, t0, np.maximum(t0, after))
    else:
        t = np.where(first, 0.0, prev)
    prog = np.repeat(np.arange(len(workload.prog_ptr) - 1), np.diff(workload.prog_ptr))
    return t + np.asarray(workload.prog_delay_s, np.float64)[prog]


@dataclass
class IdealLog:
    """The reference's side of a run: per-op start and end (``end - start = ideal_s``), step issue times,
    the makespan; the fields of :class:`sim.engine.engine.EngineLog` that the results read."""

    op_start_s: np.ndarray
    op_end_s: np.ndarray
    step_issue_s: np.ndarray
    makespan_s: float
    ideal_s: np.ndarray
