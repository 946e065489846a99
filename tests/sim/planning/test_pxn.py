"""PXN in the planner (sim.planning.pxn): cross-rail sends hop over NVLink to the receiver's rail first."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.errors import SimError
from sim.planning.collectives import plan_collective
from sim.planning.options import PlanOptions
from sim.planning.pxn import network_rails


def split(plan, gps):
    inter = (plan.src // gps) != (plan.dst // gps)
    return inter, ~inter & (plan.src != plan.dst)


@settings(max_examples=15, deadline=None)
@given(st.integers(2, 4), st.sampled_from([2, 4, 8]), st.integers(1, 3))
def test_rail_only_alltoall_leaves_every_server_on_the_receivers_rail(servers, gps, parts):
    n = servers * gps
    g = topologies.build("rail_only", num_gpus=n, gpus_per_server=gps)
    size = 1 << 16
    plan = plan_collective("AllToAll", size, range(n), graph=g, nchannels=parts)
    inter, nvl = split(plan, gps)
    assert np.all(plan.src[inter] % gps == plan.dst[inter] % gps)  # the network hop stays on one rail
    # every cross-rail pair is relayed once: its bytes cross NVLink at the sender and the network once
    cross = sum(1 for a in range(n) for b in range(n) if a // gps != b // gps and a % gps != b % gps)
    same_rail = sum(1 for a in range(n) for b in range(n) if a // gps != b // gps and a % gps == b % gps)
    local = sum(1 for a in range(n) for b in range(n) if a != b and a // gps == b // gps)
    assert plan.bytes[inter].sum() == pytest.approx((cross + same_rail) * size)
    assert plan.bytes[nvl].sum() == pytest.approx((cross + local) * size)
    # a relayed network hop waits for its NVLink hop from the same sender's server
    rows = np.repeat(np.arange(len(plan)), np.diff(plan.dep_ptr))
    assert np.all(plan.dep_idx < rows)
    for i in np.flatnonzero(inter & (np.diff(plan.dep_ptr) > 0)):
        (j,) = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        assert plan.dst[j] == plan.src[i] and plan.src[j] // gps == plan.src[i] // gps


def test_pxn_modes():
    only = topologies.build("rail_only", num_gpus=16)
    opt = topologies.build("rail_optimized", num_gpus=16)
    base = len(plan_collective("AllToAll", 1 << 20, range(16), graph=opt))
    assert len(plan_collective("AllToAll", 1 << 20, range(16), graph=only)) == base + 2 * 8 * 7  # 112 relays
    assert len(plan_collective("AllToAll", 1 << 20, range(16), graph=only, pxn=False)) == base
    forced = plan_collective("AllToAll", 1 << 20, range(16), graph=opt, pxn=True)  # NCCL's default PXN
    inter, _ = split(forced, 8)
    assert len(forced) == base + 112 and np.all(forced.src[inter] % 8 == forced.dst[inter] % 8)
    # rail-aligned rings need no relay, even where the rails require it
    ring = plan_collective("AllReduce", 1 << 24, range(16), graph=only, algo="ring")
    assert len(ring) == len(plan_collective("AllReduce", 1 << 24, range(16), graph=opt, algo="ring"))
    rails = network_rails(only)
    assert len(set(rails.values())) == 8 and len(set(network_rails(opt).values())) == 1


def test_pxn_option_is_checked():
    with pytest.raises(SimError, match="plan option pxn='yes' must be true, false or None"):
        PlanOptions(pxn="yes")


def test_relayed_alltoall_runs_on_rail_only():
    from sim.bench.run import run_bench

    t = run_bench("AllToAll", topologies.build("rail_only", num_gpus=16), [1 << 24])
    # each GPU's 400G NIC carries 8 x 1 MiB out of its 15 x 1 MiB: >= 8 MiB / 50 GB/s
    assert float(t["time"].iloc[0]) * 1e-6 >= 8 * (1 << 20) / 50e9
