"""The compiled chunk reader (traces.formats.nccl.kernel_numba) against the numpy path: same traces, same reports.

The two are independent implementations of one set of rules (docs/nccl_logs.md), so the strongest test is
to feed both the same text, well-formed and damaged, and ask for identical results.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import read_nccl_logs
from traces.schema import TraceError

pytest.importorskip("numba")
from traces.formats.nccl import kernel_numba as nccl_log_jit  # noqa: E402 - needs numba

OUTER = ["", "[2025-07-25 19:54:57] ", "[2025-07-25 19:54:57.123456] ", "2025-07-25 19:54:57,5 ",
         "2025-07-25T19:54:58.25 ", "(RayTrainWorker pid=1, ip=1.2.3.4) ", "[1,3]<stdout>:", "3: ",
         "x 2025-07-25 19:54:59.1 [2025-07-25 19:54:50] "]
OPS = ["AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Send", "Recv", "AlltoAll", "Gather", "PutSignal",
       "Bogus"]
DAMAGE = [" ", "  ", ":", "x", "0", "-", "[", "]", "\r", "\t", "\u00e9", "0x"]


@st.composite
def line(draw) -> str:
    """One log line: a COLL, TUNING, Init, ring or other NCCL line, with an outer prefix and maybe damage."""
    host = draw(st.sampled_from(["h", "node-1", "gpu-node-10"]))
    pid = draw(st.integers(1, 3))
    prefix = draw(st.sampled_from(OUTER)) + f"{host}:{pid}:{pid} [{pid % 2}] NCCL INFO "
    kind = draw(st.sampled_from(["coll", "coll", "coll", "tuning", "init", "ring", "other", "bare"]))
    if kind in ("coll", "bare"):
        op = draw(st.sampled_from(OPS))
        extra = draw(st.sampled_from(["", " acc 0x1"]))
        tail = draw(st.sampled_from([" stream 0x30", " stream", " stream 0x30 task 1 globalrank 3"]))
        body = (f"{op}: opCount {draw(st.integers(0, 2**64 - 1)):x} sendbuff 0x10 recvbuff 0x20{extra} count "
                f"{draw(st.integers(0, 10**6))} datatype {draw(st.integers(0, 12))} op 0 root {draw(st.integers(-1, 3))} "
                f"comm 0x{draw(st.sampled_from(['a', 'B', '00c0']))} [nranks={draw(st.integers(1, 4))}]{tail}")
        text = body if kind == "bare" else prefix + body
    elif kind == "tuning":
        text = prefix + draw(st.sampled_from([
            "4096 Bytes -> Algo 0 proto 1 time 12.500000",
            "AllReduce: 4096 Bytes -> Algo 1 proto 2 time 1.0",
            "AllGather: 8192 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}",
            "xyReduceScatter: 32 Bytes -> Algo PAT proto LL channel{Lo..Hi}={0..0}"]))
    elif kind == "init":
        text = prefix + (f"ncclCommInitRank comm 0x{draw(st.sampled_from(['a', 'b']))} rank {pid - 1} nranks 3 "
                         f"cudaDev {pid} nvmlDev 0 busId 1 commId 0x9 - Init COMPLETE")
    elif kind == "ring":
        text = prefix + draw(st.sampled_from(["Channel 00/02 :    0   1   2", "Channel 01/02 : 0 2 ...",
                                              "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC"]))
    else:
        text = prefix + draw(st.sampled_from(["NCCL version 2.21.5+cuda12.4", "Bootstrap : Using eth0",
                                              "Connected all rings"]))
    for _ in range(draw(st.integers(0, 2)) if draw(st.integers(0, 3)) == 0 else 0):
        at = draw(st.integers(0, len(text)))
        what = draw(st.sampled_from(["insert", "delete", "replace"]))
        piece = draw(st.sampled_from(DAMAGE))
        if what == "insert":
            text = text[:at] + piece + text[at:]
        elif what == "delete":
            text = text[:at] + text[at + 1:]
        else:
            text = text[:at] + piece + text[at + 1:]
    return text


def read(path, engine, monkeypatch):
    monkeypatch.setattr(nccl_log_scan, "ENGINE", engine)
    try:
        df, report = read_nccl_logs([path])
    except TraceError as exc:
        return ("error", str(exc))
    return df, report


def assert_same(a, b):
    if isinstance(a[0], str) or isinstance(b[0], str):
        assert a == b
        return
    (df1, r1), (df2, r2) = a, b
    assert df1.equals(df2), (df1.compare(df2) if df1.shape == df2.shape else (df1.shape, df2.shape))
    assert df1.attrs == df2.attrs
    assert r1.as_dict() == r2.as_dict()


def check_any_lines(tmp_path_factory, monkeypatch, lines, newline, last_newline):
    path = tmp_path_factory.mktemp("jit") / "x.log"
    path.write_bytes((newline.join(lines) + (newline if last_newline else "")).encode("utf-8", "surrogatepass"))
    assert_same(read(path, "numpy", monkeypatch), read(path, "jit", monkeypatch))


ANY_LINES = (st.lists(line(), min_size=1, max_size=14), st.sampled_from(["\n", "\r\n"]), st.booleans())


# CI runs 40 examples (each reads a file twice, ~0.15 s); the slow twin below runs 600.
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(*ANY_LINES)
def test_compiled_and_numpy_paths_agree_on_any_lines(tmp_path_factory, monkeypatch, lines, newline, last_newline):
    check_any_lines(tmp_path_factory, monkeypatch, lines, newline, last_newline)


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(*ANY_LINES)
def test_compiled_and_numpy_paths_agree_on_any_lines_long(tmp_path_factory, monkeypatch, lines, newline,
                                                          last_newline):
    check_any_lines(tmp_path_factory, monkeypatch, lines, newline, last_newline)


@st.composite
def torn_lines(draw) -> list[str]:
    """Lines where some are cut at any byte by 1-2 other lines (another process's writes)."""
    lines = draw(st.lists(line(), min_size=2, max_size=10))
    out: list[str] = []
    while lines:
        head = lines.pop(0)
        if len(lines) >= 2 and len(head) > 1 and draw(st.booleans()):
            cut = draw(st.integers(1, len(head) - 1))
            k = draw(st.integers(1, min(2, len(lines) - 1)))
            between, lines = lines[:k], lines[k:]
            out += [head[:cut] + between[0], *between[1:], head[cut:]]
        else:
            out.append(head)
    return out


def check_torn_lines(tmp_path_factory, monkeypatch, lines):
    # The torn-line search runs in both readers (lines with two prefixes go to the per-line path): the same
    # traces and the same counts, whatever the damage.
    path = tmp_path_factory.mktemp("torn") / "x.log"
    path.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    assert_same(read(path, "numpy", monkeypatch), read(path, "jit", monkeypatch))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(torn_lines())
# Found by CI: a TUNING line torn by one whose op name has garbage glued to it (two marks on one line; the
# positional reader read the first and dropped the second).
@example(lines=["h:1:1 [1] NCCL INFO 4096 Bytes -> Algo 0 proto 1 h:1:1 [1] NCCL INFO xyReduceScatter: 32 Bytes"
                " -> Algo PAT proto LL channel{Lo..Hi}={0..0}", "time 12.500000",
                "h:1:1 [1] NCCL INFO 4096 Bytes -> Algo 0 proto 1 time 12.500000"])
# Found by CI (session 23): a host name with garbage glued on (so the clean-name map is not empty) in a
# file whose chunk of collective lines is empty: the map's first-row lookup took the max of no rows.
@example(lines=["h:1:1 [1] NCCL INFO ncclCommInitRank comm 0xa rank 0 nranks 3 cudaDev 1 nvmlDev 0 busId 1 "
                "commId 0x9 - Init COMPLETE", "h:1:1 [1] NCCL INFO 4096 Bytes -> Algo 0 proto 1 time 12.500000",
                "xh:1:1 [1] NCCL INFO ncclCommInitRank comm 0xa rank 0 nranks 3 cudaDev 1 nvmlDev 0 busId 1 "
                "commId 0x9 - Init COMPLETE"])
def test_compiled_and_numpy_paths_agree_on_torn_lines(tmp_path_factory, monkeypatch, lines):
    check_torn_lines(tmp_path_factory, monkeypatch, lines)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(torn_lines())
def test_compiled_and_numpy_paths_agree_on_torn_lines_long(tmp_path_factory, monkeypatch, lines):
    check_torn_lines(tmp_path_factory, monkeypatch, lines)


def test_tuning_line_with_two_prefixes_is_read_once(tmp_path, monkeypatch):
    # Found by the torn-line fuzz: the compiled reader handed a TUNING line with two prefixes to the
    # per-line path for the torn-line search, which read its TUNING record a second time.
    lines = ["h:1:1 [1] NCCL INFO h:1:1 [1] NCCL INFO 4096 Bytes -> Algo 0 proto 1 time 12.500000",
             "h:1:1 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x10 recvbuff 0x20 count 1024 datatype 0 op 0 root 0 "
             "comm 0xa [nranks=1] stream 0x30",
             "h:1:1 [1] NCCL INFO h:1:1 [1] NCCL INFO 1024 Bytes -> Algo 1 proto 2 time 2.0"]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    numpy_df, numpy_report = read(path, "numpy", monkeypatch)
    jit_df, jit_report = read(path, "jit", monkeypatch)
    assert_same((numpy_df, numpy_report), (jit_df, jit_report))
    assert jit_df["algo"].tolist() == ["RING"]
    assert any("1 TUNING line(s) matched no COLL line" in n for n in jit_df.attrs["collsim"]["notes"])



def test_torn_tuning_line_keeps_both_records(tmp_path, monkeypatch):
    # Found by the torn-line fuzz: process 3's TUNING line cut by process 1's TUNING line holds two
    # TUNING records; the positional reader read both, the compiled reader's per-line path only the first.
    coll = ("h:1:1 [1] NCCL INFO AllReduce: opCount 0 sendbuff 0x10 recvbuff 0x20 count 4096 datatype 0 op 0 "
            "root 0 comm 0xa [nranks=1] stream 0x30")
    lines = [coll,
             "h:3:3 [1] NCCL INFO AllReduce: 4096 Bytes -> Algo 1 proto 2 time "
             "h:1:1 [1] NCCL INFO 4096 Bytes -> Algo 0 proto 1 time 12.500000",
             "1.0"]
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    numpy_df, numpy_report = read(path, "numpy", monkeypatch)
    jit_df, jit_report = read(path, "jit", monkeypatch)
    assert_same((numpy_df, numpy_report), (jit_df, jit_report))
    assert jit_df["algo"].tolist() == ["TREE"]  # process 1's record, matched to its COLL line
    assert any("1 TUNING line(s) matched no COLL line" in n for n in jit_df.attrs["collsim"]["notes"])

def test_chunk_borders_and_the_read_ahead_thread(tmp_path, monkeypatch):
    # Tiny chunks: many kernel calls in flight at once, lines counted across chunk borders, a wrapped
    # COLL line whose continuation starts the next chunk.
    lines = []
    for i in range(300):
        lines.append(f"[2025-07-25 19:54:{i % 60:02d}.{i:06d}] h:{1 + i % 3}:1 [0] NCCL INFO AllReduce: opCount "
                     f"{i // 3:x} sendbuff 0x1 recvbuff 0x2 count {i // 3} datatype 7 op 0 root 0 comm 0xa [nranks=3] stream")
        if i % 50 == 7:
            lines[-1] = lines[-1].replace(" comm 0xa", "\n   comm 0xa")
        if i % 40 == 3:
            lines.append(f"h:{1 + i % 3}:1 [0] NCCL INFO AllReduce: {4 * (i // 3)} Bytes -> Algo RING proto LL "
                         "channel{Lo..Hi}={0..0}")
    path = tmp_path / "x.log"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setattr(nccl_log_scan, "CHUNK_BYTES", 700)
    numpy_df, numpy_report = read(path, "numpy", monkeypatch)
    jit_df, jit_report = read(path, "jit", monkeypatch)
    assert_same((numpy_df, numpy_report), (jit_df, jit_report))
    # 8 TUNING lines, each copied to the 3 ranks of its (comm, seq) collective
    assert len(jit_df) == 300 and (jit_df["algo"] == "RING").sum() == 8 * 3


def test_kernel_classifies_lines():
    text = (b"h:1:1 [0] NCCL INFO AllReduce: opCount 1 sendbuff 0x1 recvbuff 0x2 count 4 datatype 7 op 0 root 0 "
            b"comm 0xA [nranks=2] stream 0x3\r\n"
            b"h:1:1 [0] NCCL INFO AllReduce: 16 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..0}\n"
            b"h:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 1 - Init COMPLETE\n"
            b"garbage Send: opCount 1\n"
            b"h:1:1 [0] NCCL INFO Bootstrap : Using eth0")
    coll, words, tuning, others, n_lines = nccl_log_jit.scan_chunk(np.frombuffer(text, dtype=np.uint8))
    assert n_lines == 5
    assert coll[:, nccl_log_jit.C_LINE].tolist() == [0, 3] and coll[:, nccl_log_jit.C_OK].tolist() == [1, 0]
    assert coll[0, nccl_log_jit.C_COUNT] == 4 and words[0].tolist() == [1, 0xA]
    assert text[coll[0, nccl_log_jit.C_HS]: coll[0, nccl_log_jit.C_HE]] == b"h"
    assert tuning[:, nccl_log_jit.T_OK].tolist() == [1] and tuning[0, nccl_log_jit.T_NBYTES] == 16
    assert others[:, 0].tolist() == [2]  # the Init line; the bootstrap line holds no rare-line literal


def test_hash_collisions_fall_back_to_slicing(monkeypatch):
    buf = b"ab cd ab ef"
    a = np.frombuffer(buf, dtype=np.uint8)
    monkeypatch.setattr(nccl_log_jit, "span_hashes", lambda a, s, e: np.zeros(len(s), dtype=np.uint64))
    codes, uniq = nccl_log_jit.distinct_spans(a, buf, np.array([0, 3, 6, 9]), np.array([2, 5, 8, 11]))
    assert [uniq[c] for c in codes] == [b"ab", b"cd", b"ab", b"ef"]


@pytest.mark.parametrize(("engine", "size", "loaded", "expected"), [
    ("numpy", 1 << 40, True, False), ("jit", 0, False, True),
    ("auto", 0, False, False), ("auto", 1 << 40, False, True), ("auto", 0, True, True)])
def test_engine_choice(monkeypatch, engine, size, loaded, expected):
    monkeypatch.setattr(nccl_log_scan, "ENGINE", engine)
    modules = dict(nccl_log_scan.sys.modules)
    if not loaded:
        modules.pop("traces.formats.nccl.kernel_numba", None)
    monkeypatch.setattr(nccl_log_scan.sys, "modules", modules)
    assert nccl_log_scan.use_jit(size) is expected
