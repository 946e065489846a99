"""Torn lines (issue 12, item 3): two processes writing into one file, one line cut by the other's lines.

The property: any interleaving of two valid logs, where a line may be cut in two by complete lines of the
other process, gives every intact COLL line back as it was, and every torn one either back as it was or
counted as skipped; no row is invented. Both chunk readers must agree.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import read_nccl_logs
from traces.formats.nccl.torn import TORN_REASON
from traces.schema import ROOTED_OPS

OPS = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"]
DTYPES = {0: "int8", 2: "int32", 7: "fp32", 9: "bf16"}
OTHER = ["Bootstrap : Using eth0:10.0.0.1<0>", "Connected all rings", "NET/IB : No device found."]


def coll_line(host, pid, dev, comm, k, op, count, dt, root):
    return (f"{host}:{pid}:{pid + 5} [{dev}] NCCL INFO {op}: opCount {k:x} sendbuff 0x7f00{k:x} recvbuff 0x7f10{k:x} "
            f"count {count} datatype {dt} op 0 root {root} comm {comm} [nranks=2] stream 0x55aa")


@st.composite
def process_log(draw, host, pid, dev, comm):
    """One process's lines: COLL lines (count = a unique id) and a few other NCCL lines."""
    lines, colls = [], {}
    for k in range(draw(st.integers(1, 7))):
        if draw(st.integers(0, 4)) == 0:
            lines.append(f"{host}:{pid}:{pid + 5} [{dev}] NCCL INFO " + draw(st.sampled_from(OTHER)))
            continue
        op, dt, root = draw(st.sampled_from(OPS)), draw(st.sampled_from(sorted(DTYPES))), draw(st.integers(0, 1))
        count = pid * 100_000 + draw(st.integers(0, 999)) * 10 + k
        lines.append(coll_line(host, pid, dev, comm, k, op, count, dt, root))
        colls[len(lines) - 1] = (count, op, DTYPES[dt], root if op in ROOTED_OPS else -1)
    return lines, colls


@st.composite
def torn_file(draw):
    """Interleave two logs; a line may be cut at any byte by >= 1 complete lines of the other process."""
    hosts = draw(st.permutations(["a", "node-7", "12h", "gpu1"]))
    logs = [draw(process_log(hosts[0], 1, 0, "0xa")), draw(process_log(hosts[1], 2, 1, "0xb"))]
    pos = [0, 0]
    out: list[str] = []
    intact, torn = {}, {}
    while pos[0] < len(logs[0][0]) or pos[1] < len(logs[1][0]):
        p = draw(st.sampled_from([q for q in (0, 1) if pos[q] < len(logs[q][0])]))
        q = 1 - p
        lines, colls = logs[p]
        line = lines[pos[p]]
        left = len(logs[q][0]) - pos[q]
        if left and draw(st.integers(0, 2)) == 0:
            cut = draw(st.integers(1, len(line) - 1))
            between = draw(st.integers(1, min(left, 3)))
            others = logs[q][0][pos[q]: pos[q] + between]
            for j in range(between):
                if pos[q] + j in logs[q][1]:
                    c = logs[q][1][pos[q] + j]
                    intact[c[0]] = c
            pos[q] += between
            out.append(line[:cut] + others[0])
            out += others[1:]
            out.append(line[cut:])
            if pos[p] in colls:
                torn[colls[pos[p]][0]] = colls[pos[p]]
        else:
            out.append(line)
            if pos[p] in colls:
                intact[colls[pos[p]][0]] = colls[pos[p]]
        pos[p] += 1
    return "\n".join(out) + "\n", intact, torn


def read(path, engine, monkeypatch):
    monkeypatch.setattr(nccl_log_scan, "ENGINE", engine)
    return read_nccl_logs([path])


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(case=torn_file())
def test_any_interleaving_gives_intact_lines_back_and_counts_torn_ones(tmp_path, monkeypatch, case):
    text, intact, torn = case
    path = tmp_path / "mixed.log"
    path.write_text(text)
    results = [read(path, engine, monkeypatch) for engine in ("numpy", "jit")]
    (df, report), (df2, report2) = results
    assert df.equals(df2) and report.skipped == report2.skipped and report.examples == report2.examples
    rows = {(r.count, r.op, r.dtype, r.root) for r in df.itertuples()}
    assert len(rows) == len(df)  # no line read twice
    assert rows <= set(intact.values()) | set(torn.values())  # nothing invented or read wrong
    assert set(intact.values()) <= rows  # every intact line back, as it was
    recovered = rows & set(torn.values())
    assert len(recovered) + report.skipped_total == len(torn)  # every torn line back or counted


def test_torn_line_recovered_with_its_prefix(tmp_path):
    # The head ends in the middle of the count ("count 12" + "34"); the host token "12gpu1" is split
    # back at the host seen at a line start.
    a = coll_line("n0", 1, 0, "0xa", 0, "AllReduce", 1234, 7, 0)
    b = [coll_line("gpu1", 2, 1, "0xb", k, "AllReduce", 7 + k, 7, 0) for k in range(2)]
    cut = a.index("count 12") + len("count 12")
    path = tmp_path / "x.log"
    path.write_text("\n".join([a[:cut] + b[0], b[1], a[cut:], a.replace("count 1234", "count 99")]) + "\n")
    df, report = read_nccl_logs([path])
    assert report.skipped_total == 0
    assert sorted(zip(df["host"], df["count"], strict=True)) == [("gpu1", 7), ("gpu1", 8), ("n0", 99), ("n0", 1234)]


def test_torn_line_without_its_rest_is_counted(tmp_path):
    a = coll_line("n0", 1, 0, "0xa", 0, "AllGather", 1234, 7, 0)
    b = coll_line("n1", 2, 1, "0xb", 0, "AllGather", 5, 7, 0)
    path = tmp_path / "x.log"
    path.write_text(a[:60] + b + "\n" + "an unrelated line\n")
    df, report = read_nccl_logs([path])
    assert df["count"].tolist() == [5]
    assert report.skipped == {TORN_REASON: 1} and report.examples[TORN_REASON].endswith("x.log:1")
    with pytest.raises(Exception, match="torn COLL line"):
        read_nccl_logs([path], strict=True)


def test_head_of_a_non_coll_line_is_not_counted(tmp_path):
    # "Setting affinity ..." cut by a COLL line: not collective data, nothing to count.
    b = coll_line("n1", 2, 1, "0xb", 0, "AllGather", 5, 7, 0)
    path = tmp_path / "x.log"
    path.write_text("n0:1:1 [0] NCCL INFO Setting affinity for GPU 0 to ff" + b + "\n" + "ff,ffff\n")
    df, report = read_nccl_logs([path])
    assert df["count"].tolist() == [5] and report.skipped_total == 0
