"""Rows a measured nccl-tests table contradicts: flagged by one rule, counted, never dropped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sim.bench.row_flags import FLAG_FACTOR, flag_rows
from sim.bench.validate import error_summary
from traces.formats.nccl_tests import parse_tables
from traces.readers import ingest

DATA = Path(__file__).resolve().parents[2] / "data" / "nccl_tests"


def _columns(path: Path):
    for t in parse_tables(path.read_text())[0]:
        rows = t["rows"]
        yield (np.array([r["size"] for r in rows], dtype=float), np.array([r["time_us"] for r in rows]),
               np.array([r["time_inplace_us"] for r in rows]))


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.txt")))
def test_every_suite_row_is_flagged_exactly_by_the_rule(name):
    # the rule restated row by row: a flag iff the out-of-place time is over twice its in-place time or
    # over twice some time of a larger size; and no flag on a zero-byte row
    for size, oop, inp in _columns(DATA / name):
        flags = flag_rows(size, oop, inp)
        assert len(flags) == len(size)
        both = np.fmin(oop, inp)
        for i in range(len(size)):
            larger = both[size > size[i]]
            slow_pair = bool(inp[i] > 0 and oop[i] > FLAG_FACTOR * inp[i])
            slow_vs_larger = bool(larger.size and np.isfinite(larger).any()
                                  and oop[i] > FLAG_FACTOR * np.nanmin(larger))
            want = "" if size[i] == 0 else ("columns" if slow_pair else "non-monotone" if slow_vs_larger else "")
            assert flags[i] == want, (name, int(size[i]), oop[i], inp[i])


def test_the_stalled_tables_rows_are_the_flagged_ones():
    # the DGX 2 x 8 run: its first row (8 B, 172.7 us against 40.2 in-place) and the 8 - 128 KiB rows
    # (0.3 - 1.7 ms, against 39 - 41 us at 16 B - 4 KiB and 0.33 ms at 256 KiB in-place) are flagged;
    # the 16 B - 4 KiB rows and every size from 256 KiB on are kept
    size, oop, inp = next(_columns(DATA / "dgx_2x8_h100_ib.txt"))
    flags = flag_rows(size, oop, inp)
    flagged = set(size[flags != ""].astype(int))
    assert flagged == {8, 8192, 16384, 32768, 65536, 131072}
    assert all(oop[flags != ""] > FLAG_FACTOR * 40.2)
    assert not (flags[size >= 262144] != "").any()


def test_nccl_tests_trace_carries_the_in_place_time():
    trace = ingest([DATA / "nccl_tests_309_8x8_h100_ib.txt"], format="nccl-tests")
    entry = trace.attrs["collsim"]["nccl_tests"][1]
    assert entry["time_inplace_us"][0] == pytest.approx(93.26) and entry["time_us"][0] == pytest.approx(317.0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1.0, 1e5), min_size=2, max_size=12), st.floats(0.55, 1.8), st.integers(0, 11),
       st.floats(2.05, 50.0))
def test_monotone_tables_are_never_flagged_and_a_stall_is(steps_us, noise, where, stall):
    # times that grow with size and in-place columns within the factor: nothing is flagged; multiplying
    # one row (not the last) by more than the factor over every later time flags that row only
    t = np.cumsum(steps_us)
    size = 8.0 * 2.0 ** np.arange(len(t))
    inp = t * noise
    assert (flag_rows(size, t, inp) == "").all()
    i = where % (len(t) - 1)
    stalled = t.copy()
    stalled[i] = stall * max(t[-1], inp[-1])
    flags = flag_rows(size, stalled, inp)
    assert flags[i] in ("columns", "non-monotone")
    assert (np.delete(flags, i) == "").all()


def test_bad_factor_and_lengths_are_errors():
    with pytest.raises(ValueError, match="above 1"):
        flag_rows([8], [1.0], [1.0], factor=1.0)
    with pytest.raises(ValueError, match="lengths"):
        flag_rows([8, 16], [1.0], [1.0])


def test_summary_leaves_flagged_rows_out_of_the_median_and_counts_them():
    t = pd.DataFrame({"table": 0, "size": [8, 16, 32, 1 << 30], "ratio": [0.1, 1.2, 1.1, 1.05],
                      "flag": ["columns", "", "", ""]})
    s = error_summary(t).iloc[0]
    assert (s.small_n, s.small_flagged, s.large_flagged) == (2, 1, 0)
    assert s.small_median == pytest.approx(0.15) and s.small_worst == pytest.approx(0.2)
    assert s.small_median_all == pytest.approx(0.2)
