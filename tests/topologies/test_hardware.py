"""NIC presets of topologies.hardware: aws-ofi-nccl's P4d / P4de entry (``efa_p4d``) against its cited
figures and the closed form of an 8-byte AllReduce, and the fabrics that select it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import topologies
from sim.planning import tuning
from sim.planning.collectives import plan_collective
from sim.planning.machine import graph_machine
from sim.planning.nccl_tables import BASE_LAT_US, HW_LAT_US, PROTOS
from topologies.errors import TopologyError
from topologies.hardware import NIC_PRESETS, hardware_attrs, preset_help

FABRICS = Path(__file__).resolve().parents[1] / "data" / "nccl_tests" / "fabrics.json"
SIMPLE = PROTOS.index("Simple")


def _p4d(**kw):
    return topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="a100", nic="efa_p4d",
                            link_gbps=50, **kw)


def _critical_path_s(plan) -> float:
    """Longest chain of ``delay_s`` through the plan's dependencies (an infinitely fast network)."""
    finish = np.zeros(len(plan))
    for i in range(len(plan)):
        deps = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        finish[i] = (finish[deps].max() if len(deps) else 0.0) + plan.delay_s[i]
    return float(finish.max())


def test_efa_p4d_carries_the_plugins_p4d_figures():
    hw = hardware_attrs({"gpu": "a100", "nic": "efa_p4d"})
    # platform_data_map (src/platform-aws.cpp): latency 75.0, NCCL_BUFFSIZE 8388608; Simple only
    # (config_endpoint: no FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES on first-generation EFA)
    assert hw["net_latency_us"] == 75.0 and hw["protos"] == ["Simple"] and hw["nccl_buffsize"] == 8 << 20
    # P5's physical step (nccl_ofi_model.cpp net_lat 20); Simple adds NCCL's Ampere flush as one more
    # network latency (tuning.cc) and TUNER_NET_COMP_OVERHEAD (3 us)
    assert hw["net_phys_latency_us"] == 20.0 and hw["net_phys_simple_extra_us"] == 20.0 + 3.0
    assert "net_tuner" not in hw  # the plugin's tuners cover P5 and later only
    assert "efa_p4d" in preset_help()


def test_other_presets_keep_their_figures():
    assert NIC_PRESETS["efa"] == {
        "efficiency": 0.94, "net_latency_us": 75.0, "protos": None, "net_phys_latency_us": 20.0,
        "net_phys_simple_extra_us": 3.0, "net_tuner": "aws-ofi", "nccl_env": {"nccl_buffsize": 8388608},
        "about": NIC_PRESETS["efa"]["about"]}
    for name in ("ib", "roce", "socket"):
        assert NIC_PRESETS[name]["net_latency_us"] == 0.0 and "net_phys_latency_us" not in NIC_PRESETS[name]


def test_small_allreduce_on_two_p4d_is_tree_simple_with_the_flush_on_each_network_hop():
    g = _p4d()
    model = graph_machine(g, range(16))[1]
    assert model.protos == ("Simple",)
    plan = plan_collective("AllReduce", 8, range(16), graph=g)
    assert (plan.algo, plan.proto) == ("tree", "Simple")
    # base + 2 (7 NVLink hops + 1 network hop): the network hop pays hwLat + 20 us + (20 + 3) us
    nvlink, net = HW_LAT_US["nvlink"]["tree"][SIMPLE], HW_LAT_US["net"]["tree"][SIMPLE]
    want_us = BASE_LAT_US["tree"][SIMPLE] + 2 * (7 * nvlink + net + 20.0 + 23.0)
    assert want_us == pytest.approx(178.4)
    assert _critical_path_s(plan) == pytest.approx(want_us * 1e-6)
    # NCCL's tuner adds the reported 75 us twice for Simple instead: 392.4 us
    assert tuning.algo_latency_s("AllReduce", "tree", "Simple", 16, 2, model) == pytest.approx(
        (BASE_LAT_US["tree"][SIMPLE] + 2 * (7 * nvlink + net + 150.0)) * 1e-6)


def test_the_runs_nccl_proto_wins_over_the_preset():
    model = graph_machine(_p4d(nccl_proto="LL,Simple"), range(16))[1]
    assert model.protos == ("LL", "Simple")
    assert plan_collective("AllReduce", 8, range(16), graph=_p4d(nccl_proto="LL,Simple")).proto == "LL"


def test_a_network_p2p_step_can_pay_the_transports_physical_latency():
    model = graph_machine(_p4d(), range(16))[1]
    bare = tuning.p2p_latency_s("Simple", True)
    assert tuning.p2p_latency_s("Simple", True, model) == pytest.approx(bare + 43e-6)
    assert tuning.p2p_latency_s("Simple", False, model) == tuning.p2p_latency_s("Simple", False)
    ib = graph_machine(topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="a100", nic="ib",
                                        link_gbps=200), range(16))[1]
    assert tuning.p2p_latency_s("Simple", True, ib) == bare  # NCCL's own transport: nothing added


@pytest.mark.parametrize("bad", ["efa-p4d", "p4d", "efa_p5", ""])
def test_unknown_nic_names_are_refused_naming_the_parameter(bad):
    with pytest.raises(TopologyError, match=r"parameter 'nic' must be one of: .*efa_p4d"):
        hardware_attrs({"nic": bad})


def test_fabrics_select_the_efa_preset_by_their_stated_instance_type():
    fabrics = {k: v for k, v in json.loads(FABRICS.read_text()).items() if not k.startswith("_")}
    p4 = {k for k, v in fabrics.items() if "p4d.24xlarge" in v["gpu"] or "p4de.24xlarge" in v["gpu"]}
    assert p4 == {"aws_p4de_2x8_a100_efa.txt", "aws_p4d_2x8_a100_efa_scatter.txt"}
    for name, fab in fabrics.items():
        nic = fab["set"].get("nic")
        if name in p4:
            assert nic == "efa_p4d", name
        elif nic in ("efa", "efa_p4d"):
            assert nic == "efa" and fab["set"]["gpu"] == "h100", name  # P5 / P5e: the RDMA protocol
