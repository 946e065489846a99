"""The limits of the simulator options (sim.option_values): the stated values, used exactly at the edge and
refused one past it."""

from __future__ import annotations

import pytest

from sim.errors import OptionError
from sim.option_values import MAX_CHANNELS, MAX_SEED
from sim.options import SimOptions


def test_limits_are_the_stated_ones():
    assert MAX_CHANNELS == 64 and MAX_SEED == 2**63 - 1
    assert SimOptions(channels=64, seed=MAX_SEED).channels == 64
    with pytest.raises(OptionError):
        SimOptions(seed=MAX_SEED + 1)
