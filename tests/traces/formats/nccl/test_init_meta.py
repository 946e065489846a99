"""What the Init side of the logs gives the metadata (traces.formats.nccl.init_meta): the rings printed at
init, in every version's form (docs/nccl_formats.md section 4), tied to their communicators."""

from __future__ import annotations

import pytest
from nccl_text import coll, pre, read_lines

pytestmark = pytest.mark.usefixtures("nccl_engine")  # every test on both chunk readers (conftest)


@pytest.mark.parametrize(
    ("ring_line", "ring", "partial"),
    [
        ("Channel 00/02 :    0   2   1   3", [0, 2, 1, 3], False),  # <= 2.22 padded
        ("Channel 00/02 : 0 2 1 3", [0, 2, 1, 3], False),  # 2.23+ compact
        ("Channel 00/02 : 0 2 ...", [0, 2], True),  # 2.23+ cut at 128 chars
        ("Channel 00 :    0   2   1   3", [0, 2, 1, 3], False),  # 2.4
    ],
)
def test_ring_lines(tmp_path, ring_line, ring, partial):
    init = "ncclCommInitRank comm 0xa rank {r} nranks 4 cudaDev 0 nvmlDev 0 busId 1 commId 0x5 - Init COMPLETE"
    lines = [pre(pid=1) + ring_line, pre(pid=1) + init.format(r=0), pre(pid=1) + "Channel 00/0 : 0[0] -> 1[1] via P2P/IPC",
             pre(pid=2) + init.format(r=1), pre(pid=1) + coll(comm="0xa", nranks=4)]
    df, _ = read_lines(tmp_path, lines)
    meta = df.attrs["collsim"]
    assert meta["rings"] == {"0x5": [ring]}
    assert meta["rings_partial"] == ({"0x5": [0]} if partial else {})
