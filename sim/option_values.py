"""What value each simulator option accepts: the limits, the choices, and one check per option
(:data:`CHECKS`, applied by :class:`sim.options.SimOptions` on construction).

A check returns the value as the simulator uses it (``"2"`` links -> 2, a list -> a tuple) or raises a
one-line :class:`~sim.errors.OptionError` naming the option, the value and the limit.

Examples
--------
>>> CHECKS["channels"](8), CHECKS["fail_links"]("2"), CHECKS["memoize"](1)
(8, 2, True)
>>> CHECKS["completion_quantile"](1)
Traceback (most recent call last):
...
sim.errors.OptionError: completion_quantile=1: must be >= 0 and < 1 (0 = exact solve)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from sim.errors import OptionError

#: Default completion batching of ``simrun run`` and ``simrun compare`` (``sim.simulate`` itself defaults to exact). The largest q of
#: 0.01, 0.02, 0.05, 0.1 that kept every case of ``benchmarks/bench_batching_accuracy.py`` (decode steps
#: at 64 and 256 GPUs, all-to-alls, independent jobs sharing a fabric, the main job) within issue 14's bars
#: against the exact solve: makespan within 0.5 %, median collective within 1 % (docs/network.md, "The
#: error bound"; tests/sim/network/test_batching.py).
DEFAULT_QUANTILE = 0.02
ALGOS = ("auto", "ring", "tree", "direct")
ROUTINGS = ("ecmp", "spray", "single", "dmodk")
TIMINGS = ("auto", "gaps", "trace", "asap")
#: Simulation tiers (``model``).
MODELS = ("flow", "analytical", "both")
#: Most channels a collective may use: NCCL's ``MAXCHANNELS`` (src/include/device.h).
MAX_CHANNELS = 64
#: Largest seed: seeds feed the ECMP hash as a signed 64-bit integer.
MAX_SEED = 2**63 - 1
#: Most fixed-width utilisation bins of one run (``bin_s``): bins x links x 8 bytes of memory, and one
#: ``link_timeseries.parquet`` row per bin per link. A run that would need more stops with an error.
MAX_TIME_BINS = 1 << 16
#: Longest straggler delay (one hour, in microseconds): beyond it float64 times lose the microsecond detail
#: of the collectives that follow (a delay of 1e30 us left a run with 0 bytes on the wire).
MAX_DELAY_US = 3.6e9


def check_seed(value: Any, name: str = "seed") -> int:
    """``value`` as a seed, or :class:`OptionError`.

    Examples
    --------
    >>> check_seed(7)
    7
    """
    seed = _integer(value, name)
    if not 0 <= seed <= MAX_SEED:
        raise OptionError(f"{name}={value}: must be an integer from 0 to 2**63-1")
    return seed


def check_bin_count(bin_s: float, span_s: float, what: str = "the run") -> None:
    """Refuse a fixed bin width that needs more than :data:`MAX_TIME_BINS` bins to cover ``span_s``.

    Raises
    ------
    OptionError

    Examples
    --------
    >>> check_bin_count(1e-3, 1.0)
    >>> check_bin_count(1e-9, 1.0)
    Traceback (most recent call last):
    ...
    sim.errors.OptionError: bin_s=1e-09: the run spans 1 s, more than 65536 bins of that width; use bin_s >= 1.53e-05 or omit bin_s
    """
    if span_s / bin_s > MAX_TIME_BINS:
        raise OptionError(f"bin_s={bin_s:g}: {what} spans {span_s:.6g} s, more than {MAX_TIME_BINS} bins of "
                          f"that width; use bin_s >= {span_s / MAX_TIME_BINS:.3g} or omit bin_s")


def _integer(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise OptionError(f"{name}={value!r}: must be an integer")
    return int(value)


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise OptionError(f"{name}={value!r}: must be a number")
    out = float(value)
    if not math.isfinite(out):
        raise OptionError(f"{name}={value!r}: must be a finite number")
    return out


def _choice(name: str, known: tuple[str, ...]) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in known:
            raise OptionError(f"{name} {value!r} is not one of: {', '.join(known)}")
        return str(value)

    return check


def _flag(name: str) -> Callable[[Any], bool]:
    def check(value: Any) -> bool:
        # 0 and 1 mean false and true exactly; any other value is refused
        if isinstance(value, bool) or (isinstance(value, numbers.Integral) and value in (0, 1)):
            return bool(value)
        raise OptionError(f"{name}={value!r}: must be true or false")

    return check


def _quantile(value: Any) -> float:
    q = _number(value, "completion_quantile")
    if not 0.0 <= q < 1.0:
        raise OptionError(f"completion_quantile={value!r}: must be >= 0 and < 1 (0 = exact solve)")
    return q


def _bin_s(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not float(value) > 0:
        raise OptionError(f"bin_s={value!r}: must be a number of seconds > 0 (omit it for adaptive bins)")
    out = float(value)
    if not math.isfinite(out):
        raise OptionError(f"bin_s={value!r}: must be a finite number of seconds")
    return out


def _channels(value: Any) -> int | None:
    if value is None:
        return None
    n = _integer(value, "channels")
    if not 1 <= n <= MAX_CHANNELS:
        raise OptionError(f"channels={value}: must be from 1 to {MAX_CHANNELS} (NCCL's MAXCHANNELS)")
    return n


def _fail_links(value: Any) -> int | str | tuple[str, ...] | None:
    if value is None or value == "" or (isinstance(value, bool) and not value):
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lstrip("-").isdigit():
            return _fail_links(int(text))
        return text
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        if value < 0:
            raise OptionError(f"fail_links={value}: must be a count >= 0 or link names NODE-NODE")
        return int(value)
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise OptionError(f"fail_links={value!r}: must be a count >= 0 or link names NODE-NODE")


def _degrade_links(value: Any) -> str | Mapping | tuple[str, ...] | None:
    if value is None or value == "":
        return None
    if isinstance(value, Mapping):
        factors = list(value.values())
    elif isinstance(value, str) or (isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)):
        items = value.split(",") if isinstance(value, str) else value
        factors = [item.strip().rpartition(":")[2] for item in items if item.strip()]
    else:
        raise OptionError(f"degrade_links={value!r}: must be N:FACTOR, NODE-NODE:FACTOR,... or {{link: factor}}")
    for factor in factors:  # the links are chosen on the graph later; a factor can be checked now
        try:
            f = float(factor)
        except (TypeError, ValueError):
            continue  # sim.anomalies names the malformed item
        if not (math.isfinite(f) and f > 0):
            raise OptionError(f"degrade_links: factor {factor!r} must be a finite number > 0")
    return tuple(value) if isinstance(value, list) else value


def _stragglers(value: Any) -> dict[int, float]:
    from sim.anomalies import parse_stragglers  # the one parser of RANK:DELAY_US

    if value is not None and not isinstance(value, str | Mapping | list | tuple):
        raise OptionError(f"stragglers={value!r}: must be RANK:DELAY_US items or {{rank: delay_us}}")
    parsed = parse_stragglers(value)
    for rank, delay_us in parsed.items():
        if not delay_us <= MAX_DELAY_US:  # also NaN and inf
            raise OptionError(f"straggler {rank}:{delay_us:g}: DELAY_US must be at most {MAX_DELAY_US:.0f} "
                              "(one hour)")
    return parsed


def _callable_or_none(value: Any) -> Callable | None:
    if value is not None and not callable(value):
        raise OptionError(f"progress={value!r}: must be a callable taking the fraction done, or None")
    return value


def _str_or_none(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise OptionError(f"trace_name={value!r}: must be a string")
    return value


def _processes(value: Any) -> tuple[Callable, ...]:
    if value is None:
        return ()
    items = tuple(value) if isinstance(value, list | tuple) else (value,)
    for fn in items:
        if not callable(fn):
            raise OptionError(f"processes: {type(fn).__name__} is not a callable fn(env, net)")
    return items


def _params(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise OptionError(f"topology_params={value!r}: must be a mapping of parameter names to values")
    return dict(value)


CHECKS: dict[str, Callable[[Any], Any]] = {
    "algo": _choice("algo", ALGOS),
    "routing": _choice("routing", ROUTINGS),
    "seed": check_seed,
    "timing": _choice("timing", TIMINGS),
    "completion_quantile": _quantile,
    "bin_s": _bin_s,
    "channels": _channels,
    "memoize": _flag("memoize"),
    "ideal": _flag("ideal"),
    "fail_links": _fail_links,
    "degrade_links": _degrade_links,
    "stragglers": _stragglers,
    "progress": _callable_or_none,
    "trace_name": _str_or_none,
    "topology_params": _params,
    "processes": _processes,
    "model": _choice("model", MODELS),
    "flows_out": lambda v: None if v is None else str(v),
}


__all__ = ["ALGOS", "CHECKS", "MAX_CHANNELS", "MAX_DELAY_US", "MAX_SEED", "MAX_TIME_BINS", "MODELS", "ROUTINGS",
           "TIMINGS", "check_bin_count", "check_seed"]
