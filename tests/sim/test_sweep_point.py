"""One sweep point's row (sim.sweep_point): the scalar summary figures and makespan over ideal."""

from __future__ import annotations

import math

from sim.sweep_point import scalar_summary


def test_scalar_summary_keeps_scalars_and_adds_makespan_vs_ideal():
    row = scalar_summary({"trace": "t", "makespan_s": 3.0, "ideal_makespan_s": 1.5, "flows": 4,
                          "hot_links": [{"link": "a->b"}], "skipped": {"x": 1}, "incast_events": 0})
    assert row == {"trace": "t", "makespan_s": 3.0, "ideal_makespan_s": 1.5, "flows": 4, "incast_events": 0,
                   "makespan_vs_ideal": 2.0}
    assert math.isnan(scalar_summary({"makespan_s": 1.0, "ideal_makespan_s": 0.0})["makespan_vs_ideal"])
