"""The nccl-tests reader against every layout nccl-tests has printed and every wrapper around it.

The samples are rendered by ``nccl_tests_render.py`` from nccl-tests' own format strings (each layout names
the commit); the reader must give back the sizes, times and busbw as printed. The behaviours around the
tables (several tables under one header, failure lines, torn rows, footers, rank groups, JSON) are built
the same way. The real files are in ``tests/data/nccl_tests`` (``tests/sim/bench``).
"""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from nccl_tests_render import LAYOUTS, WRAPPERS, Table, render, render_json, wrap

from traces.formats.nccl_tests import looks_like_nccl_tests, parse_tables
from traces.readers import detect_format, ingest
from traces.schema import TraceError

AR = Table("all_reduce", hosts=2, gpus_per_host=4, sizes=[8, 1024, 1 << 20, 1 << 30],
           times_us=[9.87, 123.456, 4321.0, 54321.9])


def _check(text: str, want: dict, table: Table, where: str = "t.txt") -> dict:
    tables, report = parse_tables(text, where)
    assert len(tables) == 1, (tables, report.summary())
    got = tables[0]
    assert not report.skipped and not report.notes, (report.summary(), report.notes)  # the footer agrees too
    assert got["nranks"] == table.nranks and got["gpus_per_node"] == table.gpus_per_host
    rows = got["rows"]
    assert [r["size"] for r in rows] == want["size"]
    assert [r["time_us"] for r in rows] == pytest.approx(want["time_us"], rel=1e-12)
    assert [r["busbw"] for r in rows] == pytest.approx(want["busbw"], rel=1e-12)
    inplace = [r["busbw_inplace"] for r in rows]
    assert all(math.isnan(a) and math.isnan(b) or a == pytest.approx(b)
               for a, b in zip(inplace, want["busbw_inplace"], strict=True))
    # the printed values are the measured ones up to the print's rounding: a unit slip (v1's ms) would show
    assert [r["time_us"] for r in rows] == pytest.approx(table.times_us, rel=1e-2, abs=0.6)
    return got


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_every_layout_reads_back_as_printed(layout):
    table = Table("reduce", hosts=1, gpus_per_host=4, root=2, sizes=AR.sizes, times_us=AR.times_us) \
        if layout == "v1" else AR
    text, want = render(table, layout)
    assert looks_like_nccl_tests(text)
    got = _check(text, want, table)
    assert got["op"] == ("Reduce" if layout == "v1" else "AllReduce")
    assert got["rows"][0]["root"] == (2 if layout == "v1" else -1)


def test_v1_broadcast_has_no_in_place_columns_and_prints_ms():
    table = Table("broadcast", hosts=1, gpus_per_host=8, root=3, sizes=[4096, 1 << 24], times_us=[31.5, 812.25])
    text, want = render(table, "v1")
    got = _check(text, want, table)
    assert math.isnan(got["rows"][0]["busbw_inplace"]) and got["rows"][1]["root"] == 3


@pytest.mark.parametrize("wrapper", list(WRAPPERS))
@pytest.mark.parametrize("crlf", [False, True])
def test_every_wrapper_reads_back(wrapper, crlf):
    text, want = render(AR, "v2.17.6")
    _check(wrap(text, wrapper, crlf), want, AR)


def test_values_too_wide_for_their_column_print_as_exponents():
    # getFloatStr (a62c975, v2.17.6): 1.07e6 GB/s does not fit 6 characters and prints "1e+06"; the reader
    # reads it, and the footer check allows for that one digit (found by the long property test)
    table = Table("all_reduce", hosts=1, gpus_per_host=2, sizes=[1 << 30], times_us=[1.0])
    text, want = render(table, "v2.17.6")
    assert "1e+06" in text
    _check(text, want, table)


def test_data_check_off_prints_na_and_gather_scatter_are_ops():
    # -c 0: "#wrong" is N/A (a0a1491, v2.13.1); gather/scatter since v2.16 (per-rank counts like AllGather)
    for stem, op in (("gather", "Gather"), ("scatter", "Scatter")):
        table = Table(stem, hosts=2, gpus_per_host=8, root=5, wrong=-1, sizes=[1 << 20, 1 << 26],
                      times_us=[77.5, 2900.0])
        text, want = render(table, "v2.17.6")
        assert "N/A" in text
        got = _check(text, want, table)
        assert got["op"] == op and got["rows"][1]["root"] == 5


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
@example(data=None)  # the fixed example below: v1 in ms under an mpirun tag
def test_property_any_table_any_layout_any_wrapper(data):
    _property(data)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_property_any_table_any_layout_any_wrapper_long(data):
    _property(data)


def _property(data) -> None:
    if data is None:
        layout, wrapper, crlf, table = "v1", "ompi_tag", False, Table("all_gather", 2, 2, [64, 128], [10.0, 9.9])
    else:
        layout = data.draw(st.sampled_from([*LAYOUTS, "json"]))
        wrapper = data.draw(st.sampled_from(list(WRAPPERS)))
        crlf = data.draw(st.booleans())
        stems = LAYOUTS[layout][1] if layout != "json" else LAYOUTS["v2.17.6"][1]
        stem = data.draw(st.sampled_from(stems))
        exps = sorted(data.draw(st.sets(st.integers(3, 34), min_size=1, max_size=12)))
        times = [data.draw(st.floats(0.5, 2e6, allow_nan=False)) for _ in exps]
        table = Table(stem, data.draw(st.integers(1, 4)), data.draw(st.integers(1, 8)), [1 << e for e in exps],
                      times, root=data.draw(st.integers(0, 3)))
    if layout == "json":
        text, want = render_json(table)
    else:
        text, want = render(table, layout)
        text = wrap(text, wrapper, crlf)
    _check(text, want, table)


def _text(*rows: str, stem: str = "all_reduce", cols: str = "redop  root") -> str:
    head = [f"# Collective test starting: {stem}_perf", "#  Rank  0 Group  0 Pid  1 on nodeA device  0 [0000:18:00] H100",
            "#  Rank  1 Group  0 Pid  2 on nodeA device  1 [0000:19:00] H100",
            f"#       size         count      type   {cols}     time   algbw   busbw #wrong     time   algbw   busbw #wrong"]
    return "\n".join(head + list(rows)) + "\n"


def test_one_header_holds_several_tables_d_all_o_all_r_all_n_cycles():
    # -d all / -o all / -r -1 loop inside one header (TimeTest per type, op, root); -N repeats the sweep (d2d40cc)
    rows = ["  1024  256  float  sum  -1  10.0  0.10  0.10  0  10.0  0.10  0.10  0",
            "  2048  512  float  sum  -1  11.0  0.19  0.19  0  11.0  0.19  0.19  0",
            "  1024  512   half  sum  -1  12.0  0.09  0.09  0  12.0  0.09  0.09  0",
            "  1024  512   half  max  -1  13.0  0.08  0.08  0  13.0  0.08  0.08  0",
            "  2048 1024   half  max  -1  14.0  0.15  0.15  0  14.0  0.15  0.15  0",
            "  1024  512   half  max  -1  15.0  0.07  0.07  0  15.0  0.07  0.07  0"]
    tables, report = parse_tables(_text(*rows))
    assert [(t["dtype"], len(t["rows"])) for t in tables] == [("fp32", 2), ("fp16", 1), ("fp16", 2), ("fp16", 1)]
    assert [t["line"] for t in tables] == [4, 7, 8, 10] and not report.skipped
    # rounding to 16-byte multiples may print one size twice in a sweep: that is not a new sweep
    tables, _ = parse_tables(_text(rows[0], rows[0], rows[1]))
    assert len(tables) == 1 and len(tables[0]["rows"]) == 3


@pytest.mark.parametrize("line", [
    "NCCL failure common.cu:640 'unhandled system error'",                 # v1.0.0 src/common.h
    "Cuda failure common.cu:301 'out of memory'",                           # v1.0.0
    "nodeA: Test CUDA failure common.cu:892 'an illegal memory access'",    # v2.0 on
    " .. nodeA pid 4242: Test failure common.cu:401",                       # v2.13 on
    "nodeA: Test timeout (5s) common.cu:523",                               # -T (v2.13 on)
    "# error: remote process exited or there was a network error",         # writeErrors (v2.17.4 on)
])
def test_every_failure_line_ends_the_table_and_is_counted(line):
    row = "  1024  256  float  sum  -1  10.0  0.10  0.10  0  10.0  0.10  0.10  0"
    tables, report = parse_tables(_text(row, line, row.replace("1024", "2048")), "f")
    assert len(tables[0]["rows"]) == 1 and report.examples["nccl-tests failure line (the run stopped there)"] == "f:6"
    # NCCL's own warnings between rows are not failures of the test
    tables, report = parse_tables(_text(row, "nodeA:1:1 [0] NCCL WARN Cuda failure 'out of memory'", row), "f")
    assert not report.skipped and len(tables[0]["rows"]) == 2


def test_failure_lines_torn_rows_and_stray_rows_are_counted(tmp_path):
    rows = ["  1024  256  float  sum  -1  10.0  0.10  0.10  0  10.0  0.10  0.10  0",
            "  2048  512  float  sum  -1node1:77:77 [0] NCCL WARN Cuda failure 'out of memory'",
            "nodeA: Test NCCL failure common.cu:1130 'unhandled cuda error (run with NCCL_DEBUG=INFO for details)'",
            "  4096 1024  float  sum  -1  12.0  0.34  0.34  0  12.0  0.34  0.34  0",
            "  8192 2048  float  sum  -1  13.0  0.63  0.63  0  13.0  0.63  0.63  0 [1,1]<stderr>:NCCL WARN x"]
    # stderr (unbuffered) landing inside a row (stdout is written piecewise): the row cannot be read
    tables, report = parse_tables(_text(*rows), "run.log")
    assert [len(t["rows"]) for t in tables] == [1]
    assert report.skipped == {"row whose out-of-place time, algbw or busbw is not a number": 1,
                              "nccl-tests failure line (the run stopped there)": 1,
                              "row outside a table (no column header before it)": 2}
    assert report.examples["nccl-tests failure line (the run stopped there)"] == "run.log:7"
    path = tmp_path / "run.log"
    path.write_text(_text(*rows))
    tables, report = parse_tables(_text(rows[0], rows[4]), "run.log")
    assert report.skipped == {"row with more columns than its header (text glued to it)": 1}
    with pytest.raises(TraceError, match=r"run.log:8: row outside a table .*\(2 line\(s\); --strict\)"):
        ingest([path], format="nccl-tests", strict=True)
    # a prefix no wrapper rule knows: the row is counted, not dropped
    tables, report = parse_tables(_text(rows[0], "<job 7> " + rows[3]), "run.log")
    assert report.skipped == {"row behind a line prefix the reader does not know": 1}
    # a run killed mid-row: the preamble printed, the measurement not
    tables, report = parse_tables(_text(rows[0], "  2048  512  float  sum  -1"))
    assert report.skipped == {"row cut short (fewer columns than its header)": 1} and len(tables[0]["rows"]) == 1


def test_footer_cross_check_and_failed_data_check():
    rows = ["  1024  256  float  sum  -1  10.0  0.10  0.10  0  10.0  0.10  0.30  0",
            "  2048  512  float  sum  -1  11.0  0.19  0.20  0  11.0  0.19  0.40  0"]
    ok = _text(*rows) + "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.25 \n"
    assert parse_tables(ok)[1].notes == []
    bad = _text(rows[0]) + "# Out of bounds values : 7 FAILED\n# Avg bus bandwidth    : 0.25 \n"
    notes = parse_tables(bad, "f")[1].notes
    assert notes[0] == "f:6: nccl-tests found 7 wrong values (data check FAILED)"
    assert notes[1].startswith("f:7: the rows above average 0.2 GB/s busbw but the footer says 0.25")


def test_split_groups_and_old_rank_lines():
    # NCCL_TESTS_SPLIT (a89cf07, v2.14.0): one communicator per group; rank 0 prints its group's figures
    lines = [f"#  Rank {r:2d} Group {r // 4:2d} Pid {r:6d} on {'nodeA':>10} device {r:2d} [0000:18:00] H100"
             for r in range(8)]
    text = "# Collective test starting: all_reduce_perf\n" + "\n".join(lines) + "\n" + _text(
        "  1024  256  float  sum  -1  10.0  0.10  0.15  0  10.0  0.10  0.15  0").split("\n", 3)[3]
    tables, report = parse_tables(text, "s")
    assert tables[0]["nranks"] == 4 and "2 rank groups (NCCL_TESTS_SPLIT)" in report.notes[0]


def test_unsupported_tests_unreadable_headers_and_missing_ops(tmp_path):
    path = tmp_path / "v.txt"
    path.write_text(_text("  1024  256  float  none  -1  10.0  0.10  0.10  0  10.0  0.10  0.10  0",
                          stem="alltoallv"))
    with pytest.raises(TraceError, match=r"no nccl-tests table found \(1 row of alltoallv_perf .*v.txt:5\)"):
        ingest([path], format="nccl-tests")
    with pytest.raises(TraceError, match=r"h.txt:2: nccl-tests column header without a time"):
        parse_tables("# all_reduce_perf\n#  size  count  type  redop  root  algbw  busbw\n", "h.txt")


def test_json_output_is_detected_and_read(tmp_path):
    table = Table("alltoall", hosts=2, gpus_per_host=8, sizes=[1 << 20, 1 << 30], times_us=[99.5, 8800.0])
    text, want = render_json(table)
    path = tmp_path / "r.json"
    path.write_text(text)
    assert detect_format(path) == "nccl-tests"
    _check(text, want, table)
    df = ingest([path])
    assert df.attrs["collsim"]["nccl_tests"][0]["op"] == "AllToAll" and len(df) == 2 * 16
    path.write_text(text[: len(text) // 2])
    with pytest.raises(TraceError, match=r"r.json:1: nccl-tests JSON output is cut short"):
        ingest([path], format="nccl-tests")


def test_cli_refuses_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "noop.txt"
    path.write_text("#       size         count      type   redop    root     time   algbw   busbw\n"
                    "        1024           256     float     sum      -1    10.00    0.10    0.18\n")
    proc = subprocess.run([sys.executable, "-m", "sim", "ingest", str(path), "-o", str(tmp_path / "o.parquet"),
                           "--format", "nccl-tests"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        f"simrun: error: {path}:1: nccl-tests table without its operation (no *_perf name or 'Collective test "
        "starting' line before it)"]


def test_rank_lines_give_each_rank_its_host_and_device(tmp_path):
    # SPEC §3: host "" / device -1 only when unknown; the "#  Rank r ... on HOST device D" lines name them
    lines = [f"#  Rank {r:2d} Group  0 Pid {100 + r:6d} on {'node' + 'AB'[r // 4]:>10} device {r % 4:2d} [0000:18:00] H100"
             for r in range(8)]
    text = "# Collective test starting: all_reduce_perf\n" + "\n".join(lines) + "\n" + _text(
        "  1024  256  float  sum  -1  10.0  0.10  0.18  0  10.0  0.10  0.18  0").split("\n", 3)[3]
    path = tmp_path / "placed.txt"
    path.write_text(text)
    df = ingest(path, "nccl-tests")
    placed = df.groupby("rank")[["host", "device"]].first()
    assert placed["host"].tolist() == ["nodeA"] * 4 + ["nodeB"] * 4
    assert placed["device"].tolist() == [0, 1, 2, 3] * 2
    # without rank lines nothing is invented
    bare = tmp_path / "bare.txt"
    bare.write_text("\n".join(line for line in text.splitlines() if "Rank" not in line))
    df = ingest(bare, "nccl-tests")
    assert set(df["host"]) == {""} and set(df["device"]) == {-1}
