"""Small traces for the answer, verdict, report and timeline tests."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from traces.schema import new_metadata, validate

MIB = 1 << 20


def training_step(world: int = 16, steps: int = 4, nbytes: int = 64 * MIB, gap_s: float = 20e-3,
                  per_leaf: int = 4) -> pd.DataFrame:
    """An AllReduce-bound data-parallel step: ``steps`` gradient AllReduces ``gap_s`` apart on one
    communicator whose ring order strides across leaves (every ring hop crosses the fabric)."""
    order = [r for j in range(per_leaf) for r in range(j, world, per_leaf)]
    rows = [dict(rank=r, comm="dp", seq=k, op="AllReduce", count=nbytes, dtype="uint8", bytes=nbytes, root=-1,
                 nranks=world, t_start_s=k * gap_s, duration_s=np.nan, host="", device=-1,
                 context="site=grad_sync", algo="", proto="") for r in range(world) for k in range(steps)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"dp": order}, "test", gpus_per_node=1)
    return validate(df)


def nvlink_only(world: int = 8) -> pd.DataFrame:
    """A TP trace inside one 8-GPU server: no byte crosses a network link."""
    rows = [dict(rank=r, comm="tp0", seq=k, op="AllReduce", count=MIB, dtype="uint8", bytes=MIB, root=-1,
                 nranks=world, t_start_s=k * 1e-4, duration_s=np.nan, host="", device=-1, context="", algo="",
                 proto="") for r in range(world) for k in range(3)]
    df = pd.DataFrame(rows)
    df.attrs["collsim"] = new_metadata(world, {"tp0": list(range(world))}, "test", gpus_per_node=8)
    return validate(df)


@pytest.fixture(scope="session")
def step_trace() -> pd.DataFrame:
    return training_step()


@pytest.fixture(scope="session")
def small_step_trace() -> pd.DataFrame:
    return training_step(steps=2, nbytes=4 * MIB)


@pytest.fixture(scope="session")
def tp_only_trace() -> pd.DataFrame:
    return nvlink_only()
