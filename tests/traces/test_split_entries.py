"""The split checks' buffer-range fast path and the per-chunk reader give what row-by-row code gives."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.io import split_arrays
from traces.split_entries import base_range, split_out_of_range, split_sums

ENTRY = st.one_of(st.integers(0, 40), st.integers(-3, 2 ** 53 + 2), st.just(2 ** 62))
ROW = st.one_of(st.none(), st.lists(ENTRY, min_size=0, max_size=6))


def _column(chunks):
    return pa.chunked_array([pa.array(c, type=pa.list_(pa.int64())) for c in chunks], type=pa.list_(pa.int64()))


def _oracle_range(rows, max_entry):
    return [any(x < 0 or x > max_entry for x in r) for r in rows]


def _oracle_sums(rows):
    # the row sum exact; -1 where the float estimate reaches 2**62 (split_sums' contract), asserted only
    # for sums far from that edge
    return [sum(r) for r in rows]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(ROW, min_size=0, max_size=5), min_size=1, max_size=4), st.integers(0, 2 ** 53))
def test_reader_rows_and_checks_match_row_by_row(chunks, max_entry):
    column = _column(chunks)
    rows = split_arrays(column)
    expect = [r or [] for r in column.to_pylist()]
    assert [r.tolist() for r in rows] == expect and all(r.dtype == np.int64 for r in rows)
    assert all(not r.flags.writeable for r in rows)
    lens = np.array([len(r) for r in expect], dtype=np.int64)
    assert split_out_of_range(rows, lens, max_entry).tolist() == _oracle_range(expect, max_entry)
    # the same rows as tuples take the row-by-row path (no buffers): the same answer
    tuples = np.empty(len(expect), dtype=object)
    tuples[:] = [tuple(r) for r in expect]
    assert split_out_of_range(tuples, lens, max_entry).tolist() == _oracle_range(expect, max_entry)
    ok = ~np.array(_oracle_range(expect, 2 ** 53), dtype=bool)
    if ok.all():
        got = split_sums(rows, lens)
        assert got.tolist() == split_sums(tuples, lens).tolist()
        assert got.tolist() == [s if s < 2 ** 60 else int(got[k]) for k, s in enumerate(_oracle_sums(expect))]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-5, 100), min_size=1, max_size=30), st.data())
def test_base_range_bounds_every_view(values, data):
    flat = np.array(values, dtype=np.int64)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(values)), min_size=2, max_size=8)))
    spans = [(a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    if not spans:
        return
    rows = np.empty(len(spans), dtype=object)
    rows[:] = [flat[a:b] for a, b in spans]
    lo, hi = base_range(rows)
    assert (lo, hi) == (int(flat.min()), int(flat.max()))
    assert all(lo <= x <= hi for r in rows for x in r.tolist())


def test_base_range_refuses_what_it_cannot_bound():
    flat = np.arange(8, dtype=np.int64)
    one = np.empty(1, dtype=object)
    for row in (flat,                                 # owns its data: no buffer to look at
                flat[::2],                            # strided
                flat.view(np.uint8)[3:19].view(np.int64),  # unaligned: reads across elements
                flat.astype(np.int32)[1:3],           # not int64
                (1, 2)):
        one[0] = row
        assert base_range(one) is None
