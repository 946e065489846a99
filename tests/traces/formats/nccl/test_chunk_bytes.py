"""The chunk's byte operations (traces.formats.nccl.chunk_bytes): the literal search and the token factorisation
paths read the same trace."""

from __future__ import annotations

import pytest
from nccl_text import coll, pre, read_lines

from traces.formats.nccl import chunk_bytes

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


def test_literal_search_paths_agree(tmp_path, monkeypatch):
    # Chunk.find loops over bytes.find for rare literals and uses a numpy byte pass for frequent ones:
    # forcing the numpy pass everywhere gives the same trace.
    init = "ncclCommInitRank comm 0xa rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 1 commId 0x9 - Init COMPLETE"
    lines = [pre() + "NCCL version 2.21.5+cuda12.4", pre() + init, pre() + "Channel 00/01 :    0",
             *(pre() + coll(opc=f"{i:x}", comm="0xa", nranks=1) for i in range(5)),
             pre() + "AllReduce: 4096 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..0}"]
    loop, _ = read_lines(tmp_path, lines)
    monkeypatch.setattr(chunk_bytes, "_FIND_LOOP_MAX", 0)
    numpy_pass, _ = read_lines(tmp_path, lines)
    assert numpy_pass.equals(loop) and numpy_pass.attrs == loop.attrs
    assert loop.attrs["collsim"]["rings"] == {"0x9": [[0]]} and loop["algo"].tolist()[-1] == "RING"


def test_long_and_odd_tokens_take_the_sliced_path(tmp_path):
    # Text fields are factorised as fixed-width words up to 64 bytes; a longer host name, or one of odd
    # bytes, is sliced one by one and must read the same.
    long_host = "node-" + "x" * 70
    lines = [pre(host=long_host, pid=1) + coll(count=3), pre(host="n\u00e9", pid=2) + coll(count=5)]
    df, report = read_lines(tmp_path, lines)
    assert report.skipped_total == 0
    assert sorted(df["host"]) == sorted([long_host, "n\u00e9"]) and sorted(df["count"]) == [3, 5]
