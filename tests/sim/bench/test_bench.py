"""simrun bench / validate, the nccl-tests reader and the hardware presets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import topologies
from sim.bench.run import BENCH_COLUMNS, bench_table, bench_trace, run_bench
from sim.bench.sizes import (
    HOST_LAUNCH_US_PER_GPU,
    bench_sizes,
    gpus_per_thread,
    host_floor_s,
    parse_size,
    trace_op,
)
from sim.bench.validate import error_summary, validate_trace
from sim.errors import SimError
from sim.planning import tuning
from topologies.errors import TopologyError
from topologies.hardware import hardware_attrs
from traces.formats.nccl_tests import op_counts, parse_tables
from traces.readers import detect_format, ingest

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl_tests"
ROOT = Path(__file__).resolve().parents[3]


def _nonblocking(n: int, gbps: float = 400.0):
    # one GPU per server on a fat tree: every ring hop crosses the network at the same rate
    return topologies.build("fat_tree", num_gpus=n, gpus_per_server=1, link_gbps=gbps)


def test_sizes_follow_nccl_tests():
    assert bench_sizes(parse_size("8"), parse_size("64"), 2) == [8, 16, 32, 64]
    assert parse_size("16G") == 16 << 30
    with pytest.raises(SimError):
        parse_size("12Q")
    with pytest.raises(SimError):
        bench_sizes(64, 8)
    with pytest.raises(SimError, match="factor inf must be > 1 and finite"):  # an OverflowError before
        bench_sizes(8, 64, float("inf"))
    with pytest.raises(SimError, match="1,073,741,824 rows, more than the limit of 10,000"):  # hung before
        bench_sizes(1, 1 << 30, step_bytes=1)
    assert len(bench_sizes(1, 10_000, step_bytes=1)) == 10_000
    assert trace_op("all_reduce_perf") == "AllReduce"
    with pytest.raises(SimError):
        trace_op("all_fancy")


@given(st.integers(0, 1 << 34), st.sampled_from([1, 2, 4, 8]), st.integers(1, 64),
       st.sampled_from(["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Broadcast"]))
def test_op_counts_invariants(size, elem, n, op):
    printed, per = op_counts(op, size, elem, n)
    assert printed * elem <= size
    if op in ("AllGather", "ReduceScatter", "AllToAll"):
        assert printed == per * n and (printed + n) * elem > size - elem * n
    else:
        assert printed == per == size // elem


def test_bench_ring_allreduce_busbw_is_link_rate_at_large_sizes():
    # ring AllReduce on a non-blocking fabric: busbw -> link rate (50 GB/s) once latency is amortised
    g = _nonblocking(8)
    t = run_bench("AllReduce", g, [1 << 30], algo="ring", proto="Simple")
    assert list(t.columns) == list(BENCH_COLUMNS)
    assert t["algo"].iloc[0] == "ring" and t["proto"].iloc[0] == "Simple"
    alpha_s = sum(tuning.ring_step_latency_s("AllReduce", "Simple", 8, 8, 1 << 30))
    ideal = tuning.ideal_time_s("AllReduce", 1 << 30, 8, 50e9)
    assert t["time"].iloc[0] * 1e-6 == pytest.approx(ideal, rel=0.03)
    assert t["busbw"].iloc[0] == pytest.approx(50.0, rel=0.03)
    assert alpha_s > 0


def test_bench_table_busbw_factors():
    t = bench_table("AllGather", [8 << 20], [1e-3], 8, None)
    assert t["algbw"].iloc[0] == pytest.approx((8 << 20) / 1e-3 / 1e9)
    assert t["busbw"].iloc[0] == pytest.approx(t["algbw"].iloc[0] * 7 / 8)


def test_sendrecv_trace_is_a_ring_of_pairs():
    t = bench_trace("Send", [1024], 4)
    sends = t[t["op"] == "Send"]
    assert sorted(zip(sends["rank"], sends["root"], strict=True)) == [(0, 1), (1, 2), (2, 3), (3, 0)]


def test_sendrecv_sizes_are_timed_apart():
    """nccl-tests barriers before each size: two equal sendrecv sizes take the same time, that of the
    slowest pair (a server boundary: PXN relays it to the receiver's rail, then one NIC at line rate)."""
    g = topologies.build("rail_optimized", num_gpus=8, gpus_per_server=4)
    t = run_bench("Send", g, [16 << 20, 16 << 20])
    assert t["time"].iloc[0] == pytest.approx(t["time"].iloc[1], rel=1e-9)
    nic = topologies.schema.DEFAULT_LINK_GBPS * 1e9 / 8
    ideal = (16 << 20) / nic + tuning.p2p_latency_s("Simple", True)
    assert ideal <= t["time"].iloc[0] * 1e-6 <= ideal * 1.02


def test_bench_forced_protocol_and_bad_values():
    g = topologies.build("rail_optimized", num_gpus=8)
    t = run_bench("AllGather", g, [1 << 20], proto="LL")
    assert set(t["proto"]) == {"LL"}
    with pytest.raises(SimError, match="NCCL_PROTO"):
        run_bench("AllGather", g, [1 << 20], proto="LL64")
    with pytest.raises(SimError, match="NCCL_ALGO 'nvlink'.*NVLSTree"):
        tuning.parse_nccl_list("nvlink", "algo")
    assert tuning.parse_nccl_list("^tree", "algo") == ("ring", "nvls", "nvls_tree", "pat", "collnet_direct",
                                                      "collnet_chain", "direct")


def test_hardware_presets_and_errors():
    hw = hardware_attrs({"gpu": "h100", "nic": "efa"})
    # aws-ofi-nccl on P5: RDMA protocol (LL / LL128 allowed), 75 us reported, 20 (+3 Simple) us physical
    assert hw["protos"] is None and hw["net_latency_us"] == 75.0 and hw["net_tuner"] == "aws-ofi"
    assert (hw["net_phys_latency_us"], hw["net_phys_simple_extra_us"]) == (20.0, 3.0)
    assert "net_phys_latency_us" not in hardware_attrs({"nic": "ib"})
    assert hw["nvlink_efficiency"] == pytest.approx(18 * 20.6 / 450)
    with pytest.raises(TopologyError, match="'nic' must be one of"):
        topologies.build("rail_optimized", num_gpus=8, nic="myrinet")
    g = topologies.build("rail_optimized", num_gpus=8, gpu="a100")
    assert g.graph["nvlink_gbps"] == 2400.0 and g.graph["hardware"]["gpu"] == "a100"


def test_protocol_overhead_doubles_ll_wire_bytes():
    from sim.planning.collectives import plan_collective

    base = dict(algo="ring", proto="LL", nchannels=1, max_chunks=1)
    off = plan_collective("AllGather", 1 << 16, range(4), **base)
    on = plan_collective("AllGather", 1 << 16, range(4),
                         model=tuning.CostModel(protocol_overhead=True), **base)
    assert on.total_bytes == pytest.approx(2 * off.total_bytes)


SAMPLE = """\
[1,0]<stdout>:# nThread 1 nGpus 1 minBytes 8 maxBytes 16 step: 2(factor)
[1,0]<stdout>:#  Rank  0 Group  0 Pid 1 on nodeA device  0 [0x01] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  1 Group  0 Pid 2 on nodeA device  1 [0x02] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  2 Group  0 Pid 3 on nodeB device  0 [0x01] NVIDIA H100 80GB HBM3
[1,0]<stdout>:#  Rank  3 Group  0 Pid 4 on nodeB device  1 [0x02] NVIDIA H100 80GB HBM3
[1,0]<stdout>:# Collective test starting: all_gather_perf
[1,0]<stdout>:#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
[1,0]<stdout>:        1024            256     float    none      -1    10.00    0.10    0.08      0    11.00    0.09    0.07      0
[1,0]<stdout>:        2048            512     float    none      -1    12.00    0.17    0.13      0      N/A     N/A     N/A    N/A
0: # Collective test starting: broadcast_perf
0: #       size         count      type   redop    root     time   algbw   busbw  error     time   algbw   busbw  error
0:         4096          1024     float    none       1    20.00    0.20    0.20  0e+00    21.00    0.20    0.20  0e+00
"""


def test_reader_prefixes_inplace_and_several_tables(tmp_path):
    path = tmp_path / "perf.txt"
    path.write_text(SAMPLE)
    assert detect_format(path) == "nccl-tests"
    df = ingest([path])
    tables = df.attrs["collsim"]["nccl_tests"]
    assert [t["op"] for t in tables] == ["AllGather", "Broadcast"]
    assert tables[0]["nranks"] == 4 and tables[0]["gpus_per_node"] == 2 and tables[0]["nodes"] == 2
    assert tables[0]["busbw_inplace"][0] == 0.07 and np.isnan(tables[0]["busbw_inplace"][1])
    ag = df[(df["comm"] == "t0") & (df["seq"] == 0)]
    assert len(ag) == 4 and set(ag["bytes"]) == {256} and np.allclose(ag["duration_s"], 10e-6)
    bc = df[df["comm"] == "t1"]
    assert set(bc["root"]) == {1} and len(bc) == 4


def test_reader_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.txt"
    path.write_text("#       size         count      type   redop    root     time   algbw   busbw\n"
                    "        1024           256     float     sum      -1    10.00    0.10    0.18\n")
    with pytest.raises(Exception, match=r"bad.txt:1: nccl-tests table without its operation"):
        ingest([path], format="nccl-tests")


def test_reader_ranks_from_busbw_factor():
    text = ("# all_reduce_perf\n#       size         count      type   redop    root     time   algbw   busbw\n"
            "  1073741824     268435456     float     sum      -1   4524.3  237.33  444.99\n")
    tables, _ = parse_tables(text)
    assert tables[0]["nranks"] == 16


def test_validate_on_a_suite_table():
    df = ingest([DATA / "oci_bm_gpu4_8_2x8_a100_roce.txt"], format="nccl-tests")
    table = validate_trace(df, lambda e: topologies.build("rail_optimized", num_gpus=e["nranks"],
                                                          gpus_per_server=8, link_gbps=200.0))
    assert list(table.columns[:4]) == ["size", "busbw_measured", "busbw_sim", "ratio"]
    assert table["busbw_measured"].iloc[0] == pytest.approx(222.88, rel=0.01)
    assert table["ratio"].iloc[0] == pytest.approx(table["busbw_sim"].iloc[0] / table["busbw_measured"].iloc[0])
    s = error_summary(table)
    assert s["large_n"].iloc[0] == 1


@pytest.mark.slow
def test_cli_bench_and_validate(tmp_path):
    env_py = [sys.executable, "-m", "sim"]
    out = subprocess.run(env_py + ["bench", "all_reduce", "--topo", "rail_optimized", "--nodes", "1", "-b", "1M",
                                   "-e", "4M", "-o", str(tmp_path / "b")], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "# Avg bus bandwidth" in out.stdout
    t = pd.read_parquet(tmp_path / "b" / "bench.parquet")
    assert len(t) == 3 and (tmp_path / "b" / "bench.png").exists()
    bad = subprocess.run(env_py + ["bench", "all_reduce", "--topo", "rail_optimized", "--proto", "XX"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.startswith("simrun: error:")
    val = subprocess.run(env_py + ["validate", str(DATA / "together_2x8_h100_ib.txt"), "--topo", "rail_optimized",
                                   "--set", "gpu=h100,nic=ib", "-o", str(tmp_path / "v")],
                         capture_output=True, text=True, cwd=ROOT)
    assert val.returncode == 0, val.stderr
    v = pd.read_parquet(tmp_path / "v" / "validate.parquet")
    assert len(v) == 5 and (tmp_path / "v" / "validate.png").exists()


@settings(max_examples=10, deadline=None)
@given(st.sampled_from(["ring,tree", "^LL", "Simple", "ll128,simple"]))
def test_parse_nccl_list_roundtrip(text):
    kind = "algo" if "ring" in text else "proto"
    allowed = tuning.parse_nccl_list(text, kind)
    assert allowed and len(set(allowed)) == len(allowed)


def test_broadcast_chain_is_chunked_as_nccl():
    # issue 10: a 256 MiB ring Broadcast over 8 ranks at 100 Gb/s took 2.5x its pipelined closed form with
    # 4 chunks; with NCCL's 512 KiB chunks the chain's fill is (n - 2) / C of the bandwidth term
    n, size, bw = 8, 256 << 20, 100e9 / 8
    g = topologies.build("fat_tree", num_gpus=n, gpus_per_server=1, link_gbps=100.0)
    t_s = run_bench("Broadcast", g, [size], proto="Simple")["time"].iloc[0] * 1e-6
    nch = tuning.channels_for("Broadcast", "ring", "Simple", size, n)
    chunks = tuning.pipeline_chunks(size / nch, tuning.nccl_chunk_bytes("Broadcast", "ring", "Simple", size, nch, n, n),
                                    n - 1, nch)
    assert chunks > 4
    filled = tuning.ideal_time_s("Broadcast", size, n, bw, chunks=chunks)
    assert tuning.ideal_time_s("Broadcast", size, n, bw) < t_s <= filled * 1.02 + 0.5e-3


def test_cli_bench_documents_and_checks_nccls_algorithms(tmp_path):
    env_py = [sys.executable, "-m", "sim", "bench"]
    out = subprocess.run(env_py + ["--help"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0
    for name in ("Ring", "Tree", "NVLS", "NVLSTree", "PAT", "CollNetDirect", "CollNetChain"):
        assert name in out.stdout
    bad = subprocess.run(env_py + ["all_reduce", "--topo", "rail_optimized", "--algo", "NVLSX", "-o",
                                   str(tmp_path / "x")], capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode == 2 and bad.stderr.startswith("simrun: error: NCCL_ALGO 'NVLSX'")
    assert "Traceback" not in bad.stderr


def test_plots_leave_out_zero_byte_rows(tmp_path, monkeypatch):
    # nccl-tests prints 0-byte rows (-b 0): a log size axis cannot place them, so the plots leave them
    # out (the tables keep them) and an all-zero table still gives a figure instead of a crash.
    from sim.bench import report

    drawn_sizes = []
    real_size_axis = report._size_axis
    monkeypatch.setattr(report, "_size_axis",
                        lambda ax, sizes: (drawn_sizes.append(sizes), real_size_axis(ax, sizes))[1])
    table = pd.DataFrame({"size": [0, 1024, 4096], "busbw_measured": [0.0, 1.0, 2.0],
                          "busbw_sim": [0.0, 1.1, 2.1], "ratio": [np.nan, 1.1, 1.05],
                          "busbw": [0.0, 1.1, 2.1], "algo": ["RING"] * 3, "proto": ["LL"] * 3})
    assert report.plot_validate(table, tmp_path / "v.png", "t").is_file()
    assert report.plot_bench(table, tmp_path / "b.png", "t").is_file()
    assert [list(s) for s in drawn_sizes] == [[1024.0, 4096.0], [1024.0, 4096.0]]
    zeros = table.iloc[:1]
    assert report.plot_validate(zeros, tmp_path / "z.png", "t").is_file()


@pytest.mark.parametrize("nvlink_latency_us, expected_us", [
    (0.25, 6.6 + 14 * 0.6),           # NCCL's ring/LL latency exactly: a 0.5 us path is inside its 0.6 us step
    (5.0, 10.0 + 13 * 10.0),          # a 10 us path is longer than every step: each step takes the path
])
def test_plans_pay_the_wire_once_inside_nccls_step_latency(nvlink_latency_us, expected_us):
    # one H100 server, an 8-byte ring/LL AllReduce: 14 steps of one chunk, the first with the launch
    g = topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8, nvlink_latency_us=nvlink_latency_us)
    t = run_bench("AllReduce", g, [8])
    assert (t["algo"].iloc[0], t["proto"].iloc[0]) == ("ring", "LL")
    assert t["time"].iloc[0] == pytest.approx(expected_us, abs=0.01)


def test_validate_applies_the_launch_floor_of_one_thread_driving_eight_gpus(tmp_path):
    rows = "".join(f"  {s:>10}  {s // 4:>10}     float     sum      -1    40.00    0.00    0.00      0    40.00    "
                   "0.00    0.00      0\n" for s in (8, 1024))
    head = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw"
            "   busbw #wrong\n")
    ranks = "".join(f"#  Rank  {r} Group  0 Pid  7 on  host device  {r} [0x0{r}] NVIDIA H100 80GB HBM3\n" for r in range(8))
    tables = {}
    for g in (8, 1):
        path = tmp_path / f"g{g}.txt"
        path.write_text(f"# all_reduce_perf\n# nThread 1 nGpus {g} minBytes 8 maxBytes 1024\n{ranks}{head}{rows}")
        df = ingest([path], format="nccl-tests")
        gpt = gpus_per_thread(path.read_text(), [e["line"] for e in df.attrs["collsim"]["nccl_tests"]])
        assert gpt == [g]
        tables[g] = validate_trace(df, lambda e: topologies.build("rail_optimized", num_gpus=8, gpus_per_server=8,
                                                                  gpu="h100"), gpus_per_thread=gpt)
    # one thread launching on 8 GPUs: 8 x 4.2 us per iteration, above the GPUs' ring/LL (15 us)
    assert np.allclose(tables[8]["time_sim_us"], 8 * HOST_LAUNCH_US_PER_GPU)
    assert (tables[1]["time_sim_us"] < 8 * HOST_LAUNCH_US_PER_GPU).all()
    assert np.allclose(tables[1]["time_sim_us"].iloc[0], tables[1]["time_nccl_us"].iloc[0] + 13 * 0.4, rtol=1e-3)
    assert set(tables[8]["gpus_per_thread"]) == {8}
    with pytest.raises(Exception, match="must be >= 1"):
        host_floor_s(0)
