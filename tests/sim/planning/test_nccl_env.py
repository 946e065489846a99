"""The fabric's NCCL environment (``nccl_algo``, ``nccl_proto``, ``nvls``, ``nccl_max_nchannels``) and the
ring channels of NCCL's topology search (sim.planning.machine)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.errors import SimError
from sim.planning.chunking import chunk_unit_bytes
from sim.planning.collectives import plan_collective
from sim.planning.cost_model import CostModel
from sim.planning.machine import graph_cost_model, graph_machine, ring_search_intra
from sim.planning.nccl_tables import RING_SEARCH_MAX_CHANNELS, SM90_SPEED_ARRAY_INTRA, SPEED_ARRAY_INTRA
from topologies.errors import TopologyError
from topologies.hardware import hardware_attrs


def _h100(**kw):
    return topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="h100", nic="ib", link_gbps=400,
                            **kw)


def test_nvls_off_removes_nvls_and_nvlstree():
    ranks = list(range(16))
    assert plan_collective("AllReduce", 1 << 30, ranks, graph=_h100()).algo == "nvls_tree"
    g = _h100(nvls="off")
    assert not graph_machine(g, ranks)[1].nvls
    assert plan_collective("AllReduce", 1 << 30, ranks, graph=g).algo in ("ring", "tree")
    assert plan_collective("AllReduce", 1 << 30, range(8), graph=g).algo in ("ring", "tree")


def test_nccl_algo_and_proto_from_the_fabric():
    g = _h100(nccl_algo="Ring", nccl_proto="Simple")
    model = graph_machine(g, range(16))[1]
    assert model.algos == ("ring",) and model.protos == ("Simple",) and model.protocol_overhead
    plan = plan_collective("AllReduce", 1 << 20, range(16), graph=g)
    assert (plan.algo, plan.proto) == ("ring", "Simple")
    # the environment alone is no hardware preset: line rates, no protocol overhead
    bare = topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8, nccl_proto="LL128,Simple")
    assert not graph_cost_model(bare).protocol_overhead and graph_cost_model(bare).protos == ("LL128", "Simple")


@pytest.mark.parametrize(("params", "message"), [
    ({"nvls": "maybe"}, "'nvls' must be on or off"),
    ({"nccl_max_nchannels": 0}, "'nccl_max_nchannels' must be an integer in 1 .. 64"),
    ({"nccl_max_nchannels": 2.5}, "'nccl_max_nchannels' must be an integer"),
    ({"nccl_algo": ""}, "'nccl_algo' must be a non-empty NCCL_ALGO list"),
    ({"nccl_version": "3.1"}, "'nccl_version' must be an NCCL 2.x version"),
    ({"nccl_version": "latest"}, "'nccl_version' must be an NCCL 2.x version"),
    ({"nccl_buffsize": 4096}, "'nccl_buffsize' must be an integer in 65536 .. 1073741824"),
    ({"nccl_buffsize": 2 << 30}, "'nccl_buffsize' must be an integer in 65536 .. 1073741824"),
    ({"nccl_buffsize": "8M"}, "'nccl_buffsize' must be an integer"),
])
def test_bad_environment_values_name_the_parameter(params, message):
    with pytest.raises(TopologyError, match=message):
        topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8, **params)


def test_buffsize_sets_the_simple_step_of_tree_chunks():
    # NCCL_BUFFSIZE / NCCL_STEPS is a Simple step, a tree's chunk (enqueue.cc): 1 MiB per channel of a
    # 16-channel tree is two 512 KiB chunks by default, one 1 MiB chunk with an 8 MiB buffer; LL keeps its own
    ranks = list(range(16))
    kw = {"nvls": "off", "nccl_algo": "Tree", "nccl_proto": "Simple"}
    default = plan_collective("AllReduce", 16 << 20, ranks, graph=_h100(**kw))
    big = plan_collective("AllReduce", 16 << 20, ranks, graph=_h100(nccl_buffsize=8 << 20, **kw))
    assert graph_cost_model(_h100()).simple_buff_bytes == 4 << 20
    assert (default.algo, big.algo) == ("tree", "tree")
    assert (int(default.chunk.max()) + 1, int(big.chunk.max()) + 1) == (2, 1)
    assert big.bytes.sum() == pytest.approx(default.bytes.sum())  # the same bytes, in fewer pieces
    assert chunk_unit_bytes("LL", 8 << 20) == chunk_unit_bytes("LL")
    # aws-ofi-nccl exports NCCL_BUFFSIZE=8388608 on P5 (platform-aws.cpp) unless the run sets it
    assert hardware_attrs({"nic": "efa"})["nccl_buffsize"] == 8 << 20
    assert hardware_attrs({"nic": "efa", "nccl_buffsize": 4 << 20})["nccl_buffsize"] == 4 << 20
    assert "nccl_buffsize" not in hardware_attrs({"nic": "ib"})
    with pytest.raises(SimError, match="simple_buff_bytes"):
        CostModel(simple_buff_bytes=1000)


def test_max_channels_caps_nvlink_at_the_searched_channel_speed():
    # H100: NCCL's search gives 12 ring channels of 30 GB/s; NCCL_MAX_NCHANNELS=8 leaves 8 x 30 of 370.8
    full = graph_machine(_h100(), range(8))[1]
    capped = graph_machine(_h100(nccl_max_nchannels=8), range(8))[1]
    assert capped.intra_bw_bytes_per_s == pytest.approx(8 * 30e9)
    assert capped.nvlink_efficiency == pytest.approx(full.nvlink_efficiency * 240 / 370.8)
    roomy = graph_machine(_h100(nccl_max_nchannels=32), range(8))[1]
    assert roomy.intra_bw_bytes_per_s == pytest.approx(full.intra_bw_bytes_per_s * 360 / 370.8)


@settings(max_examples=40, deadline=None)
@given(st.floats(3.0, 1500.0), st.sampled_from(["ampere", "hopper"]))
def test_ring_search_stays_within_the_links_and_uses_nccl_speeds(total_gbs, arch):
    n, speed = ring_search_intra(total_gbs, arch)
    speeds = SM90_SPEED_ARRAY_INTRA if arch == "hopper" else SPEED_ARRAY_INTRA
    assert 1 <= n <= RING_SEARCH_MAX_CHANNELS
    assert n * speed <= total_gbs + 1e-6
    # a speed of the array, or one halved by the channel duplication
    assert speed in speeds or 2 * speed in speeds or 3 * speed in speeds or total_gbs < min(speeds)


def test_no_presets_keeps_the_runs_nccl_environment():
    # --no-presets (benchmarks/validate_nccl_tests.py) drops gpu= / nic= only: A3 High's NCCL_ALGO=Ring,
    # NCCL_PROTO=Simple and NCCL_MAX_NCHANNELS=8 stay, and the fabric runs at line rates
    import json
    from pathlib import Path

    from topologies.hardware import HARDWARE_KEYS, NCCL_ENV_KEYS, PRESET_KEYS, without_presets

    assert set(HARDWARE_KEYS) == set(PRESET_KEYS) | set(NCCL_ENV_KEYS) | {"nics_per_gpu"}
    fabrics = json.loads((Path(__file__).resolve().parents[2] / "data" / "nccl_tests" / "fabrics.json").read_text())
    for name, fab in fabrics.items():
        if name.startswith("_"):
            continue
        bare = without_presets(fab["set"])
        assert not set(bare) & set(PRESET_KEYS)
        assert {k: v for k, v in fab["set"].items() if k in NCCL_ENV_KEYS} == {k: v for k, v in bare.items()
                                                                                 if k in NCCL_ENV_KEYS}
    bare = without_presets(fabrics["gcp_a3high_1x8_h100.txt"]["set"])
    model = graph_cost_model(topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8, **bare), 3600, 100)
    assert model.algos == ("ring",) and model.protos == ("Simple",) and not model.protocol_overhead
    nch, speed = ring_search_intra(450.0, "hopper")  # the search at the 3600 Gb/s line rate: 16 x 25 GB/s
    assert model.intra_bw_bytes_per_s == pytest.approx(min(nch, 8) * speed * 1e9)


def test_efa_tuner_sees_the_reported_latency_and_plans_pay_the_physical_one():
    # aws-ofi-nccl on 2 x P5: NCCL's tuner adds the reported 75 us per network step (twice for Simple),
    # plans pay the plugin's own 20 us (+3 us Simple). Small AllReduce: NCCL picks tree/LL (175.2 us
    # predicted), whose plan's critical path is 6.8 + 2 (7 x 0.6 + 5 + 20) = 65.2 us.
    from sim.planning import tuning

    g = topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="h100", nic="efa", link_gbps=400)
    model = graph_machine(g, range(16))[1]
    assert tuning.algo_latency_s("AllReduce", "tree", "LL", 16, 2, model) == pytest.approx(175.2e-6)
    assert tuning.algo_latency_s("AllReduce", "tree", "LL", 16, 2, model, physical=True) == pytest.approx(65.2e-6)
    plan = plan_collective("AllReduce", 8, range(16), graph=g)
    assert (plan.algo, plan.proto) == ("tree", "LL")
    # an infinitely fast network: the critical path is the plan's latencies alone
    finish = np.zeros(len(plan))
    for i in range(len(plan)):
        deps = plan.dep_idx[plan.dep_ptr[i]:plan.dep_ptr[i + 1]]
        finish[i] = (finish[deps].max() if len(deps) else 0.0) + plan.delay_s[i]
    assert finish.max() == pytest.approx(65.2e-6)
    # a ring plan pays the physical latency too: its steps total NCCL's formula with 20 us per network step
    base, step = tuning.ring_step_latency_s("AllReduce", "LL", 16, 2, 8, model)
    assert base + 30 * step == pytest.approx((6.6 + 28 * 1.0 + 2 * (2.7 + 20.0)) * 1e-6)


def test_aws_ofi_region_tuner_beyond_two_p5_servers():
    # aws-ofi-nccl's P5 regions (src/tuner/nccl_ofi_regions.cpp): on 4 x 8 ranks tree/LL128 to 36 MiB,
    # ring/LL128 to ~1.5 GiB, ring/Simple beyond; on two servers NCCL's own tuner decides
    from sim.planning import net_tuner, tuning

    assert net_tuner.aws_ofi_region_choice("AllReduce", 1 << 30, 16, 2) is None
    assert net_tuner.aws_ofi_region_choice("AllGather", 1 << 20, 32, 4) is None  # only AllReduce carried
    assert net_tuner.aws_ofi_region_choice("AllReduce", 1 << 20, 12, 4) is None  # 3 GPUs per server
    want = {1: ("tree", "LL128"), 32: ("tree", "LL128"), 64: ("ring", "LL128"), 1024: ("ring", "LL128"),
            4096: ("ring", "Simple")}
    g = topologies.build("rail_optimized", num_gpus=32, gpus_per_server=8, gpu="h100", nic="efa", link_gbps=400)
    model = graph_machine(g, range(32))[1]
    assert model.net_tuner == "aws-ofi"
    for mib, choice in want.items():
        assert net_tuner.aws_ofi_region_choice("AllReduce", mib << 20, 32, 4) == choice
        assert tuning.choose_algorithm("AllReduce", mib << 20, 32, 4, model=model) == choice
    # a region edge counts as inside: 36 MiB at 32 ranks is the tree's vertex
    assert net_tuner.aws_ofi_region_choice("AllReduce", 37748736, 32, 4) == ("tree", "LL128")
    # NCCL_PROTO without LL128 leaves the region's choice out of NCCL's table: NCCL's tuner decides
    simple = graph_machine(topologies.build("rail_optimized", num_gpus=32, gpus_per_server=8, gpu="h100",
                                            nic="efa", link_gbps=400, nccl_proto="Simple"), range(32))[1]
    assert tuning.choose_algorithm("AllReduce", 1 << 20, 32, 4, model=simple)[1] == "Simple"
    with pytest.raises(SimError, match="net_tuner"):
        tuning.CostModel(net_tuner="nccl-rccl")


def test_nics_per_gpu_sets_the_search_channels():
    # OCI BM.GPU4.8 (16 x 100G on 8 A100s, fabrics.json): NCCL's search sees 16 NICs of 12.5 GB/s, so 16
    # channels of 12 GB/s scale Ampere's 23.6 GB/s tree cap (2 nodes) to 377.6: the tree's 0.92 x 240
    # (NVLink-bound) stands and beats the ring at 10 GiB, as the measured 222.9 GB/s busbw (above the
    # ring's 8 x 23.5) shows. Seen as 8 NICs of 200G, the cap 8 x 23.6 would hand it to the ring.
    from sim.planning import tuning

    def model(**kw):
        g = topologies.build("rail_optimized", num_gpus=16, gpus_per_server=8, gpu="a100", nic="roce",
                             link_gbps=200, **kw)
        return graph_machine(g, range(16))[1]

    two = model(nics_per_gpu=2)
    assert tuning.net_graph_channels(two, 8) == (16, 12.0)
    assert tuning.choose_algorithm("AllReduce", 10 << 30, 16, 2, model=two) == ("tree", "Simple")
    assert tuning.choose_algorithm("AllReduce", 10 << 30, 16, 2, model=model()) == ("ring", "Simple")
    with pytest.raises(TopologyError, match="'nics_per_gpu' must be an integer in 1 .. 8"):
        model(nics_per_gpu=0)


def test_nccl_version_selects_the_tuner_constants_that_changed_after_2_23():
    from sim.planning import tuning

    def model(version=None, n=80, per_server=8):
        extra = {"nccl_version": version} if version else {}
        g = topologies.build("rail_optimized", num_gpus=n, gpus_per_server=per_server, gpu="h100", nic="ib", **extra)
        return graph_machine(g, range(n))[1]

    old, new = model(), model("2.29.2")
    assert old.nccl_version == (2, 23) and new.nccl_version == (2, 29) and model(22602).nccl_version == (2, 26)
    # NVLSTree on 10 x 8 H100 (tuning.cc v2.29.2-1): 8 heads x min(370.8/9 x 0.85 x 7/8 x 2, 47, 45.5) GB/s as a
    # ring's bus bandwidth, against 2.23's 8 x min(370.8/9, 47/2) x 5/6; its network hop 20.9 us instead of 14
    nvlstree = tuning.algo_bandwidth_bytes_per_s("AllReduce", "nvls_tree", "Simple", 80, 10, new)
    assert nvlstree == pytest.approx(8 * 45.5e9 * 80 / 158)
    assert tuning.algo_bandwidth_bytes_per_s("AllReduce", "nvls_tree", "Simple", 80, 10, old) == pytest.approx(
        8 * min(370.8e9 / 9, 47e9 / 2) * 5 / 6)
    lat = tuning.algo_latency_s("AllReduce", "nvls_tree", "Simple", 80, 10, new)
    assert lat == pytest.approx((25 + 2 * 3 * 20.9) * 1e-6)
    # so 2.29 keeps NVLSTree at 1 - 2 GiB, where 2.23 takes the ring (the measured 10 x 8 table drops from
    # 337 to 314 GB/s busbw between 2 and 4 GiB, where 2.29 with NCCL's 48 GB/s ring speed turns to the ring)
    for size in (1 << 30, 2 << 30):
        assert tuning.choose_algorithm("AllReduce", size, 80, 10, model=old)[0] == "ring"
        assert tuning.choose_algorithm("AllReduce", size, 80, 10, model=new)[0] == "nvls_tree"
    # PAT's bus factor is 0.75 from 2.24 on (one GPU per server)
    pat = [tuning.algo_bandwidth_bytes_per_s("AllGather", "pat", "Simple", 10, 10, model(v, 10, 1))
           for v in (None, "2.24.3")]
    assert pat[1] == pytest.approx(pat[0] * 0.75 / 0.85)
    with pytest.raises(SimError, match="nccl_version"):
        tuning.CostModel(nccl_version=(2,))
