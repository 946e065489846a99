"""Every synthetic trace replays without deadlock, checked by an independent replay written here.

Semantics (the simulator's): each rank issues its rows in order; a collective (``comm``, ``seq``) completes
once every member has issued it; a Send completes with its matching Recv (k-th Send a→b with k-th Recv
b←a); consecutive rows of a rank with the same ``group`` >= 0 are issued together and the rank moves on
when all of them have completed. This checker only reads trace columns; it shares no code with the
generator's own issue-time replay.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from traces.schema import new_metadata, normalize
from traces.synth import synthesize


def replay_order(df: pd.DataFrame) -> tuple[bool, str]:
    """Return (finishes, reason) for a trace under the semantics above."""
    comms = df.attrs["collsim"]["comms"]
    ranks = sorted(df["rank"].unique())
    items: dict[int, list[list[tuple]]] = {}
    expected: dict[tuple, int] = {}
    for r in ranks:
        sub = df[df["rank"] == r]
        seq_list: list[list[tuple]] = []
        prev_group = None
        for row in sub.itertuples(index=False):
            if row.op == "Send":
                key = ("p2p", row.comm, int(row.rank), comms[row.comm][row.root], int(row.seq))
                expected[key] = 2
            elif row.op == "Recv":
                key = ("p2p", row.comm, comms[row.comm][row.root], int(row.rank), int(row.seq))
                expected[key] = 2
            else:
                key = ("coll", row.comm, int(row.seq))
                expected[key] = int(row.nranks)
            if row.group >= 0 and row.group == prev_group:
                seq_list[-1].append(key)
            else:
                seq_list.append([key])
            prev_group = row.group if row.group >= 0 else None
        items[int(r)] = seq_list
    posted: dict[tuple, list[int]] = {}
    done: set[tuple] = set()
    ptr = {r: 0 for r in items}
    work = list(items)
    while work:
        r = work.pop()
        if ptr[r] >= len(items[r]):
            continue
        for key in items[r][ptr[r]]:
            members = posted.setdefault(key, [])
            members.append(r)
            if len(members) == expected[key]:
                done.add(key)
                for m in set(members):
                    if ptr[m] < len(items[m]) and all(k in done for k in items[m][ptr[m]]):
                        ptr[m] += 1
                        work.append(m)
    stuck = [r for r in items if ptr[r] < len(items[r])]
    if stuck:
        r = stuck[0]
        return False, f"rank {r} stuck at item {ptr[r]} {items[r][ptr[r]]}"
    over = [k for k, v in posted.items() if len(v) != expected[k]]
    if over:
        return False, f"op {over[0]} has {len(posted[over[0]])} of {expected[over[0]]} participants"
    return True, ""


def _trace(rows: list[dict], world: int, comms: dict) -> pd.DataFrame:
    base = dict(count=1, dtype="int8", bytes=1, root=-1, t_start_s=0.0, duration_s=math.nan, host="", device=-1,
                context="", algo="", proto="", group=-1)
    frame = pd.DataFrame([{**base, **r} for r in rows])
    return normalize(frame, new_metadata(world, comms, "test"))


def test_checker_finds_blocking_send_cycle():
    # both ranks Send first, ungrouped: with rendezvous sends neither reaches its Recv
    comms = {"p": [0, 1]}
    rows = [dict(rank=0, comm="p", seq=0, op="Send", root=1, nranks=2),
            dict(rank=0, comm="p", seq=0, op="Recv", root=1, nranks=2),
            dict(rank=1, comm="p", seq=0, op="Send", root=0, nranks=2),
            dict(rank=1, comm="p", seq=0, op="Recv", root=0, nranks=2)]
    assert replay_order(_trace(rows, 2, comms))[0] is False
    grouped = [{**r, "group": 7} for r in rows]
    assert replay_order(_trace(grouped, 2, comms)) == (True, "")


def test_checker_finds_crossed_collective_order():
    comms = {"a": [0, 1], "b": [0, 1]}
    rows = [dict(rank=0, comm="a", seq=0, op="AllReduce", nranks=2),
            dict(rank=0, comm="b", seq=0, op="AllReduce", nranks=2),
            dict(rank=1, comm="b", seq=0, op="AllReduce", nranks=2),
            dict(rank=1, comm="a", seq=0, op="AllReduce", nranks=2)]
    assert replay_order(_trace(rows, 2, comms))[0] is False
    ok = rows[:2] + [rows[3], rows[2]]
    assert replay_order(_trace(ok, 2, comms)) == (True, "")


def test_checker_finds_missing_member():
    comms = {"a": [0, 1]}
    rows = [dict(rank=0, comm="a", seq=0, op="AllReduce", nranks=2)]
    assert replay_order(_trace(rows, 2, comms))[0] is False


PLANS = [
    ("deepseek-v3", dict(engine="reference", tp=16, nodes=2, requests=3, prompt_tokens="uniform:4:9",
                         output_tokens="uniform:1:3", arrival_rate=50.0)),
    ("deepseek-v3", dict(engine="vllm", tp=8, requests=3, prompt_tokens=16, output_tokens=2)),
    ("deepseek-v3", dict(engine="sglang", tp=4, dp=4, ep=16, gpus_per_node=8, requests=5, prompt_tokens=12,
                         output_tokens="uniform:1:3", arrival_rate=100.0)),
    ("deepseek-v3", dict(engine="vllm", tp=2, dp=4, ep=8, requests=3, prompt_tokens=7, output_tokens=2)),
    ("llama3-8b", dict(engine="vllm", tp=2, pp=3, requests=3, prompt_tokens=5, output_tokens=3,
                       arrival_rate=30.0)),
    ("llama3-8b", dict(mode="training", tp=2, pp=4, dp=2, micro_batches=6, seq_len=64)),
    ("llama3-8b", dict(mode="training", tp=2, pp=3, dp=2, micro_batches=2, seq_len=64, zero=1, gpus_per_node=4,
                       sequence_parallel=True)),
    ("gpt3-175b", dict(mode="training", tp=4, pp=4, dp=1, micro_batches=5, seq_len=32)),
    ("llama3-8b", dict(mode="training", tp=2, dp=4, zero=3, micro_batches=2, seq_len=32)),
    ("mixtral-8x7b", dict(mode="training", pp=2, dp=4, ep=2, micro_batches=3, seq_len=32)),
]


@pytest.mark.parametrize(("model", "plan"), PLANS, ids=[f"{m}-{i}" for i, (m, _) in enumerate(PLANS)])
def test_synthetic_traces_are_deadlock_free(model, plan):
    df = synthesize(model, **plan)
    finishes, reason = replay_order(df)
    assert finishes, reason
    # and each rank's issue times never go backwards in row order
    for _, sub in df.groupby("rank"):
        assert sub["t_start_s"].is_monotonic_increasing
