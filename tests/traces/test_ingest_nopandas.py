"""The pandas-free path of ``simrun ingest`` for NCCL logs (issue 12's fresh-process speed bar).

A new ``simrun ingest`` process must not import pandas (~0.5 s of CPU), so the steps on its path use
:mod:`traces.arrays` instead of pandas and the writer builds Arrow arrays from numpy columns (that path's
own tests, a column block against the frame it stands for: ``test_arrow_table.py``). Checked here: the
helpers give pandas' own answers (codes, order, duplicates), the registry's shortcut for JSON formats never
skips a format that would claim the file, and a real ``simrun ingest`` process imports no pandas.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.arrays import Text, duplicated, factorize, unique
from traces.formats.files import json_start
from traces.readers import FORMATS, JSON_FORMATS, _module

ROOT = Path(__file__).resolve().parents[2]
NCCL_LOG = ROOT / "tests" / "data" / "nccl_logs" / "issue1193_ray_allreduce_nranks128.log"

ints = st.lists(st.integers(-3, 40), max_size=60)
huge = st.lists(st.sampled_from([2**63 + 5, 2**64 - 1, 7, 0, 2**40 + 3, 65536 * 3]), min_size=250, max_size=300)
texts = st.lists(st.sampled_from(["h0", "h1", "", "gpu-node-3", None]), max_size=60)


@settings(max_examples=20, deadline=None)
@given(ints, huge, texts)
def test_factorize_unique_duplicated_as_pandas(small: list[int], big: list[int], words: list[str | None]) -> None:
    for values in (np.array(small, dtype=np.int64), np.array(big, dtype=np.uint64)):
        codes, uniq = factorize(values)
        ref_codes, ref_uniq = pd.factorize(values)
        assert codes.tolist() == ref_codes.tolist() and uniq.tolist() == ref_uniq.tolist()
        assert uniq.dtype == values.dtype
        assert unique(values).tolist() == pd.unique(values).tolist()
    obj = np.array(words, dtype=object)
    for sentinel in (True, False):
        codes, uniq = factorize(obj, na_sentinel=sentinel)
        ref_codes, ref_uniq = pd.factorize(obj, use_na_sentinel=sentinel)
        assert codes.tolist() == ref_codes.tolist()
        assert [None if v is None or v != v else v for v in ref_uniq] == list(uniq)  # pandas shows None as NaN
    # text held as codes into a table with repeated names: the same answer as the object column
    table = np.array(["h1", "h0", "h1", ""], dtype=object)
    at = np.array([k % 4 for k in range(len(small))], dtype=np.int64)
    codes, uniq = factorize(Text(at, table))
    ref_codes, ref_uniq = pd.factorize(table[at])
    assert codes.tolist() == ref_codes.tolist() and list(uniq) == list(ref_uniq)
    a, b = np.array(small, dtype=np.int64), np.array(small[::-1], dtype=np.int64)
    frame = pd.DataFrame({"a": a, "b": b})
    assert duplicated(a, b).tolist() == frame.duplicated().tolist()


HEADS = {  # one valid head of each JSON format (the registry's own tests detect them)
    "inspector": '{"header":{"id":"0x7f","rank":2,"n_ranks":8},"coll_perf":{"coll":"AllReduce","coll_sn":1}}',
    "profiler": '[\n{"name": "AllReduce", "cat": "COLL", "ph": "b", "id": 0, "pid": 2}',
    "flight_recorder": '{"version": "2.4", "pg_config": {}, "pg_status": {}, "entries": []}',
    "kineto": '{"schemaVersion": 1, "traceEvents": []}',
    "param": '[{"comms": "all_reduce", "req": 3, "in_msg_size": 8}]',
}


@pytest.mark.parametrize("fmt", sorted(JSON_FORMATS))
@pytest.mark.parametrize("prefix", ["", "[2025-01-01 00:00:00.000001] ", "x", "# ", "[1,0]<stdout>:", "[ 3 "])
def test_json_formats_claim_only_json_heads(fmt: str, prefix: str) -> None:
    module, _, detector = FORMATS[fmt]
    head = prefix + HEADS[fmt]
    claimed = getattr(_module(fmt), detector)(head)
    assert claimed == (prefix == "")  # the valid head is claimed, every prefixed one refused
    assert not claimed or json_start(head)  # what the registry relies on to skip importing the module


def test_simrun_ingest_of_an_nccl_log_imports_no_pandas(tmp_path: Path) -> None:
    probe = (
        "import sys\n"
        "class Probe:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'pandas':\n"
        "            raise ImportError('pandas imported on the ingest path')\n"
        "sys.meta_path.insert(0, Probe())\n"
        "from sim.cli import main\n"
        "sys.exit(main(sys.argv[1:]))\n"
    )
    out = tmp_path / "t.parquet"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLLSIM_KERNEL_BUILD": "0"}
    run = subprocess.run([sys.executable, "-c", probe, "ingest", str(NCCL_LOG), "-o", str(out)], env=env,
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "rows" in run.stdout and out.stat().st_size > 0
