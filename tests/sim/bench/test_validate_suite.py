"""The nccl-tests validation suite (tests/data/nccl_tests): provenance, fabrics, the tables as printed.

Cheap by design: the full replay of every table is ``benchmarks/validate_nccl_tests.py``; here a new table
is replayed at one size only.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import topologies
from sim.bench.validate import error_summary, validate_trace
from topologies.hardware import GPU_PRESETS, NIC_PRESETS
from traces.formats.nccl_tests import parse_tables
from traces.readers import ingest

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl_tests"
ROOT = Path(__file__).resolve().parents[3]
FABRICS = json.loads((DATA / "fabrics.json").read_text())
TABLE_FILES = sorted(p.name for p in DATA.glob("*.txt"))
#: Added this round (docs/validation.md, "New tables (this round)").
NEW_FILES = ("xxrjun_10x8_h100_ib_five_ops.txt", "xxrjun_10x1_h100_ib_five_ops.txt",
             "together_1x8_h100_reduce_scatter.txt", "together_4x8_b200_ib_sendrecv.txt",
             "nccl_tests_309_4x8_h100_ib_vm.txt", "nccl_tests_309_8x8_h100_ib.txt")
#: Held out in session 21 (docs/validation.md, "Session 21 (s21-tables)"): tables never used to build the model.
HOLDOUT_FILES = ("keitaw_p5_2x8_h100_efa.txt", "skypilot_nebius_k8s_2x8_h100_ib.txt",
                 "skypilot_nebius_vm_2x8_h100_ib_nvlstree.txt", "skypilot_coreweave_2x8_h200_ib.txt",
                 "skypilot_gcp_a3ultra_2x8_h200_allgather.txt", "dstack_lambda_2x8_b200_ib.txt",
                 "dstack_nebius_2x8_h100_ib.txt", "dstack_gcp_a4_2x8_b200_roce.txt",
                 "dstack_gcp_a3mega_2x8_h100_tcpxo_allgather.txt", "dstack_gcp_a3high_2x8_h100_tcpx_allgather.txt",
                 "xxrjun_10x4_h100_ib_five_ops.txt", "xxrjun_10x2_h100_ib_five_ops.txt",
                 "together_1x8_h100_all_gather_ring.txt", "together_1x8_h100_all_reduce_ring.txt")
#: Held out in session 22 (docs/validation.md, "Session 22: held-out tables"): files and fabrics committed before the
#: first replay, measured on the base model.
HOLDOUT_S22_FILES = ("aws_p4de_2x8_a100_efa.txt", "aws_p4d_2x8_a100_efa_scatter.txt", "aws_batch_1x8_h100_allreduce.txt",
                     "dstack_crusoe_2x8_a100_ib.txt", "oci_oke_2x8_a100_roce.txt",
                     "keitaw_p5_2x8_h100_efa_nccl2203_ofi_tuner.txt", "xxrjun_1x8_h100_five_ops.txt",
                     "xxrjun_1x4_h100_five_ops.txt")
#: Held out in session 23 (docs/validation.md, "Session 23: held-out tables"): files and fabrics committed before the
#: first replay, measured on the base model.
HOLDOUT_S23_FILES = ("dranet_mpiop_2x1_h200_roce.txt", "dranet_demo_2x1_h200_roce_allgather.txt",
                     "dranet_1x2_b200_nvlink_allgather.txt", "dranet_2x1_b200_roce_allgather.txt",
                     "oci_oke_2x8_a100_roce_nccl2251.txt", "oci_oke_2x8_a100_roce_nccl2143.txt",
                     "together_2x8_b200_ib_sendrecv.txt", "spectrumx_ocp_2x8_h200_roce.txt")


def _busbw_factor(op: str, n: int) -> float:
    """nccl-tests' busbw / algbw (doc/PERFORMANCE.md; Gather and Scatter: src/gather.cu, src/scatter.cu)."""
    if op == "AllReduce":
        return 2 * (n - 1) / n
    if op in ("AllGather", "ReduceScatter", "AllToAll", "Gather", "Scatter"):
        return (n - 1) / n
    return 1.0


def _one_size(name: str, size: int, tmp_path: Path) -> Path:
    """The file with only the rows of ``size`` (every other line kept as it is)."""
    lines = (DATA / name).read_text().splitlines()
    kept = [ln for ln in lines if not (ln.split() and ln.split()[0].isdigit() and int(ln.split()[0]) != size)]
    out = tmp_path / name
    out.write_text("\n".join(kept) + "\n")
    return out


def _build(name: str):
    fab = FABRICS[name]
    return lambda e: topologies.build(fab["topo"], num_gpus=int(e["nranks"]),
                                      gpus_per_server=int(e.get("gpus_per_node") or min(8, e["nranks"])),
                                      **fab["set"])


def test_every_table_has_its_source_and_a_fabric():
    assert set(TABLE_FILES) == {k for k in FABRICS if not k.startswith("_")}
    for name in TABLE_FILES:
        first = (DATA / name).read_text().splitlines()[0]
        assert first.startswith("# source:") and "setup:" in first, name
        fab = FABRICS[name]
        for key in ("gpu", "nvlink", "nics", "transport", "topo", "set"):
            assert fab.get(key), (name, key)
        assert fab["set"].get("gpu") in GPU_PRESETS, name
        assert fab["set"].get("nic", "ib") in NIC_PRESETS, name
        assert fab["set"]["link_gbps"] > 0, name


@pytest.mark.parametrize("name", TABLE_FILES)
def test_printed_columns_agree_with_the_ranks_read(name):
    # algbw = size / time and busbw = algbw x nccl-tests' factor at the ranks the reader found: a check of
    # the copy (no digit changed) and of the reader's rank count, on every row printed with 2+ digits
    tables, report = parse_tables((DATA / name).read_text(), name)
    assert tables
    if name in NEW_FILES + HOLDOUT_FILES + HOLDOUT_S22_FILES + HOLDOUT_S23_FILES:  # older files keep launcher lines
        # ("8 more processes have sent help ...")
        assert not report.skipped, (name, report.skipped)
    for t in tables:
        for r in t["rows"]:
            if r["algbw"] >= 1.0 and r["time_us"] > 0:
                assert r["size"] / (r["time_us"] * 1e3) == pytest.approx(r["algbw"], rel=0.01, abs=0.01), \
                    (name, r["line"])
                assert r["busbw"] / r["algbw"] == pytest.approx(_busbw_factor(t["op"], t["nranks"]), rel=0.01), \
                    (name, r["line"])


@pytest.mark.parametrize(("name", "ops", "nranks", "per_node"), [
    ("xxrjun_10x8_h100_ib_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 80, 8),
    ("xxrjun_10x1_h100_ib_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 10, 1),
    ("together_1x8_h100_reduce_scatter.txt", ["ReduceScatter"], 8, 8),
    ("together_4x8_b200_ib_sendrecv.txt", ["Send"], 32, 8),
    ("nccl_tests_309_4x8_h100_ib_vm.txt", ["AllReduce"], 32, 8),
    # held out (session 21): mpirun tags inside rows, Ray labels, docs without '#', no Rank lines
    ("keitaw_p5_2x8_h100_efa.txt", ["AllReduce"], 16, 8),
    ("skypilot_gcp_a3ultra_2x8_h200_allgather.txt", ["AllGather", "AllGather"], 16, 8),
    ("xxrjun_10x4_h100_ib_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 40, 4),
    ("xxrjun_10x2_h100_ib_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 20, 2),
    # held out (session 22): srun -l prefixes, a log whose table names no op (scatter_perf from the header line)
    ("aws_p4d_2x8_a100_efa_scatter.txt", ["Scatter"], 16, 8),
    ("oci_oke_2x8_a100_roce.txt", ["AllReduce"], 16, 8),
    ("keitaw_p5_2x8_h100_efa_nccl2203_ofi_tuner.txt", ["AllReduce"], 16, 8),
    ("xxrjun_1x8_h100_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 8, 8),
    ("xxrjun_1x4_h100_five_ops.txt", ["AllReduce", "AllGather", "ReduceScatter", "AllToAll", "Send"], 4, 4),
    # held out (session 23): one GPU per node, Google's run_nccl_tests.sh (all_gather_perf from the header line),
    # a one-process-per-host -g 8 run, the 2-node Together B200 SendRecv
    ("dranet_mpiop_2x1_h200_roce.txt", ["AllReduce"], 2, 1),
    ("dranet_demo_2x1_h200_roce_allgather.txt", ["AllGather"], 2, 1),
    ("dranet_1x2_b200_nvlink_allgather.txt", ["AllGather"], 2, 2),
    ("dranet_2x1_b200_roce_allgather.txt", ["AllGather"], 2, 1),
    ("oci_oke_2x8_a100_roce_nccl2251.txt", ["AllReduce"], 16, 8),
    ("oci_oke_2x8_a100_roce_nccl2143.txt", ["AllReduce"], 16, 8),
    ("together_2x8_b200_ib_sendrecv.txt", ["Send"], 16, 8),
    ("spectrumx_ocp_2x8_h200_roce.txt", ["AllReduce"], 16, 8),
])
def test_new_tables_read_as_printed(name, ops, nranks, per_node):
    df = ingest([DATA / name], format="nccl-tests")
    tables = df.attrs["collsim"]["nccl_tests"]
    assert [t["op"] for t in tables] == ops
    assert {t["nranks"] for t in tables} == {nranks}
    assert {t["gpus_per_node"] for t in tables} == {per_node}
    assert {t["nodes"] for t in tables} == {nranks // per_node}


@pytest.mark.parametrize(("name", "op", "rows"), [
    ("dstack_nebius_2x8_h100_ib.txt", "AllReduce", 31),  # the page dropped every '#': header, units, footer
    ("dstack_gcp_a4_2x8_b200_roce.txt", "AllReduce", 11),
    ("dstack_gcp_a3high_2x8_h100_tcpx_allgather.txt", "AllGather", 11),
    ("dstack_lambda_2x8_b200_ib.txt", "AllReduce", 29),  # no Rank lines
    ("skypilot_coreweave_2x8_h200_ib.txt", "AllReduce", 5),
    ("aws_p4de_2x8_a100_efa.txt", "AllReduce", 29),  # srun -l '0:' prefixes, no Rank lines (session 22)
    ("dstack_crusoe_2x8_a100_ib.txt", "AllReduce", 29),  # the page dropped every '#'
])
def test_tables_without_rank_lines_take_the_ranks_from_the_busbw_factor(name, op, rows):
    # 2 servers x 8 GPUs: AllReduce busbw/algbw = 2 x 15/16, AllGather 15/16 -> 16 ranks; every row read
    tables, report = parse_tables((DATA / name).read_text(), name)
    assert [(t["op"], t["nranks"], t["gpus_per_node"], len(t["rows"])) for t in tables] == [(op, 16, None, rows)]
    assert not report.skipped
    # the reader's footer check: a page that shows only part of the sweep (A4: rows from 8 MiB of a run from
    # 8 B) keeps the whole run's "Avg bus bandwidth", which the reader notes as rows missing, and nothing else
    if report.notes:
        min_bytes = int(re.search(r"minBytes (\d+)", (DATA / name).read_text()).group(1))
        assert all("footer says" in n for n in report.notes) and min_bytes < tables[0]["rows"][0]["size"]


def test_reader_accepts_unmarked_headers_and_ray_labels():
    # docs that render a log drop the '#' of nccl-tests' comment lines; SkyPilot (Ray) prefixes each line of a
    # node's output with "(head, rank=0, pid=N)" before mpirun's tag (s21-tables' 3-regex edit of the reader)
    row = "   1048576     262144     float     sum      -1   100.00   10.49   19.66      0   100.00   10.49   19.66      0"
    unmarked = "all_reduce_perf\n      size   count   type   redop   root   time   algbw   busbw  #wrong   time   algbw" \
               "   busbw  #wrong\n       (B) (elements)   (us)\n" + row + "\n  Avg bus bandwidth    : 19.66\n"
    ray = "# all_reduce_perf\n" + "".join(f"(head, rank=0, pid=38) [1,0]<stdout>:{ln}\n" for ln in (
        "#  Rank  0 Group  0 Pid 7 on h0 device  0 [0x01] NVIDIA H200",
        "#  Rank  1 Group  0 Pid 8 on h1 device  0 [0x01] NVIDIA H200",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw"
        " #wrong", row))
    for text, nranks, nodes in ((unmarked, 16, None), (ray, 2, 2)):
        tables, report = parse_tables(text)
        assert [(t["nranks"], t["nodes"], len(t["rows"])) for t in tables] == [(nranks, nodes, 1)]
        assert tables[0]["rows"][0]["time_us"] == 100.0 and not report.skipped


def test_one_file_with_two_clusters_sizes_reads_each_rank_list():
    # 8 nodes then 4 of them: the second Rank list starts a new table with its own ranks
    tables, _ = parse_tables((DATA / "nccl_tests_309_8x8_h100_ib.txt").read_text())
    assert [(t["nranks"], t["nodes"], t["gpus_per_node"]) for t in tables] == [(64, 8, 8), (32, 4, 8)]


def test_zero_byte_rows_are_kept_and_left_out_of_the_error():
    # the 1 x 8 ReduceScatter prints four 0-byte rows: read (no row dropped), never counted as an error
    tables, _ = parse_tables((DATA / "together_1x8_h100_reduce_scatter.txt").read_text())
    sizes = [r["size"] for r in tables[0]["rows"]]
    assert len(sizes) == 31 and sizes.count(0) == 4
    s = error_summary(pd.DataFrame({"table": [0, 0], "size": [0, 1 << 30], "ratio": [math.nan, 1.05]}))
    assert s["large_n"].iloc[0] == 1 and s["small_n"].iloc[0] == 0


@pytest.mark.parametrize(("name", "op", "size", "bound_gbps"), [
    # AllToAll, one GPU per server: each rank's (n-1)/n S leaves over its one 400 Gb/s NIC -> busbw <= 50 GB/s
    ("xxrjun_10x1_h100_ib_five_ops.txt", "AllToAll", 1073741760, 50.0),
    # ReduceScatter in one H100 server: busbw cannot pass the 450 GB/s NVLink line rate
    ("together_1x8_h100_reduce_scatter.txt", "ReduceScatter", 1073741824, 450.0),
    # held out (session 23): AllReduce on 2 ranks, one 400 Gb/s NIC each: each rank moves S over its NIC -> <= 50 GB/s
    ("dranet_mpiop_2x1_h200_roce.txt", "AllReduce", 1073741824, 50.0),
    # AllGather on 2 B200 of one server: (n-1)/n S reaches each GPU over NVLink5, 18 x 50 GB/s line rate
    ("dranet_1x2_b200_nvlink_allgather.txt", "AllGather", 1073741824, 900.0),
])
def test_new_tables_replay_at_one_size(tmp_path, name, op, size, bound_gbps):
    trace = ingest([_one_size(name, size, tmp_path)], format="nccl-tests")
    table = validate_trace(trace, _build(name))
    row = table[table["op"] == op]
    assert len(row) == 1 and int(row["size"].iloc[0]) == size
    sim, measured = float(row["busbw_sim"].iloc[0]), float(row["busbw_measured"].iloc[0])
    assert 0 < sim <= bound_gbps * (1 + 1e-9)
    assert row["ratio"].iloc[0] == pytest.approx(sim / measured)
    assert row["algo"].iloc[0] and row["proto"].iloc[0]
    assert np.isfinite(row["time_sim_us"].iloc[0])


@pytest.mark.slow
def test_benchmark_only_filter_reruns_one_table():
    out = subprocess.run([sys.executable, "benchmarks/validate_nccl_tests.py", "--only", "together_1x8", "--detail"],
                         capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "together_1x8_h100_reduce_scatter.txt#0" in out.stdout and "1 tables;" in out.stdout
    assert "ring/" in out.stdout
    bad = subprocess.run([sys.executable, "benchmarks/validate_nccl_tests.py", "--only", "no_such_table"],
                         capture_output=True, text=True, cwd=ROOT)
    assert bad.returncode != 0 and "no table file matches" in bad.stderr
