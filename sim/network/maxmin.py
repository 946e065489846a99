"""Max-min fair rates of flows over links (progressive filling), in numpy, with a compiled twin.

:func:`max_min_rates` runs :func:`max_min_rates_numpy` or the compiled kernel of
:mod:`sim.network.maxmin_numba`, as :func:`use_compiled` chooses; both use
:data:`sim.network.constants.SHARE_RTOL` and the same float operations in the same order, so the rates are
bit-identical (tested) and the choice only moves time.

The choice (one function, for every compiled kernel of :mod:`sim.network`): importing numba and loading
the cached machine code costs about :data:`JIT_LOAD_S` of CPU per process, as much as thousands of small
numpy solves. So a process starts on numpy and loads the kernel once the numpy solver's estimated extra
cost over the kernel (:func:`numpy_excess_s`, charged after every numpy solve) has reached the load cost,
or at once for a problem of :data:`JIT_MIN_INCIDENCES` or more: the ski-rental rule, never more than about
twice the better of "always numpy" and "load at once". The constants are measured by
``python benchmarks/bench_scale.py --solver-crossover``. Solves of
:data:`sim.network.constants.HEAP_MIN_INCIDENCES` or more (always compiled) run the heap water-filling of
:mod:`sim.network.maxmin_heap` instead: the same allocation up to float rounding, at a cost that does not
grow with the number of water levels.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from sim.network import constants
from sim.network.constants import SHARE_RTOL
from topologies.numba_cache import compiled_pays, import_kernels, kernels_cached

__all__ = ["JIT_LOAD_S", "JIT_MIN_INCIDENCES", "NUMPY_INCIDENCE_PASS_S", "NUMPY_PASS_S", "SOLVER", "charge_numpy",
           "max_min_rates", "max_min_rates_numpy", "numpy_excess_charged_s", "numpy_excess_s", "use_compiled"]


def max_min_rates(flow_ptr: np.ndarray, link_idx: np.ndarray, capacity: np.ndarray,
                  weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """Max-min fair rates of flows over links (progressive filling, local bottlenecks frozen per pass).

    Parameters
    ----------
    flow_ptr : ndarray of int, shape (n + 1,)
        CSR pointers: flow ``i`` crosses ``link_idx[flow_ptr[i]:flow_ptr[i + 1]]``; every flow crosses at
        least one link.
    link_idx : ndarray of int
        Link ids, ``0 <= id < len(capacity)``.
    capacity : ndarray of float64
        Capacity of each link (bytes/s, or any unit: rates come back in the same unit), ``>= 0``.
    weight : ndarray of float64, shape (n,), optional
        Flow ``i`` stands for ``weight[i]`` identical flows (same links): it counts ``weight[i]`` times on
        each of its links and its rate is the rate of each of them (weighted max-min). Default 1.

    Returns
    -------
    rates : ndarray of float64, shape (n,)
        The max-min fair rate of each flow.
    iterations : int
        Water-filling passes (each freezes every link that is a local bottleneck).

    Examples
    --------
    >>> rates, _ = max_min_rates(np.array([0, 1, 2, 4]), np.array([0, 1, 0, 1]), np.array([1.0, 2.0]))
    >>> rates.round(3).tolist()
    [0.5, 1.5, 0.5]

    Flow 0 standing for two identical flows gets the rate each of them gets:

    >>> max_min_rates(np.array([0, 1, 2]), np.array([0, 0]), np.array([3.0]), np.array([2.0, 1.0]))[0].tolist()
    [1.0, 1.0]
    """
    flow_ptr = np.ascontiguousarray(flow_ptr, dtype=np.int64)
    link_idx = np.ascontiguousarray(link_idx, dtype=np.int64)
    weight = (np.ones(flow_ptr.size - 1) if weight is None
              else np.ascontiguousarray(weight, dtype=np.float64))
    kernel = _compiled_kernel() if use_compiled(link_idx.size) else None
    if kernel is not None and link_idx.size >= constants.HEAP_MIN_INCIDENCES:
        from sim.network.maxmin_heap import max_min_heap_kernel
        kernel = max_min_heap_kernel   # a big solve: one bottleneck link at a time (same rates to rounding)
    if kernel is not None:
        rates, iterations = kernel(flow_ptr, link_idx, np.ascontiguousarray(capacity, dtype=np.float64), weight)
        return rates, int(iterations)
    rates, iterations = max_min_rates_numpy(flow_ptr, link_idx, capacity, weight)
    charge_numpy(numpy_excess_s(link_idx.size, iterations))
    return rates, iterations


#: Max-min solver: "auto" (numpy until :func:`use_compiled` says the compiled kernel pays for its loading;
#: numpy throughout where numba is missing), "jit" (the kernel always) or "numpy" (never). Rates are
#: bit-identical (tested).
SOLVER = "auto"
#: CPU seconds to import numba and load the cached kernel in a fresh process (measured; see the module doc).
JIT_LOAD_S = 0.75
#: A problem this large (link incidences) loads the kernel at once: numpy alone would cost about the load.
JIT_MIN_INCIDENCES = 250_000
#: The numpy solver's extra cost over the kernel: per water-filling pass, and per incidence and pass.
NUMPY_PASS_S = 45e-6
NUMPY_INCIDENCE_PASS_S = 25e-9
_KERNEL: dict[str, Any] = {}
_SPENT = {"numpy_excess_s": 0.0}


def numpy_excess_s(incidences: int, iterations: int) -> float:
    """Estimated CPU seconds the numpy solver spends beyond the compiled kernel on one solve.

    Examples
    --------
    >>> round(numpy_excess_s(20_000, 30) * 1e3, 2)  # a 64-GPU all-to-all's solve, in ms
    16.35
    """
    return iterations * (NUMPY_PASS_S + NUMPY_INCIDENCE_PASS_S * incidences)


def charge_numpy(excess_s: float) -> None:
    """Record time a numpy path spent beyond its compiled twin (it moves :func:`use_compiled` closer to yes)."""
    _SPENT["numpy_excess_s"] += float(excess_s)


def numpy_excess_charged_s() -> float:
    """CPU seconds this process's numpy paths have cost beyond their compiled twins so far (estimated).

    Examples
    --------
    >>> numpy_excess_charged_s() >= 0.0
    True
    """
    return _SPENT["numpy_excess_s"]


def use_compiled(incidences: int = 0) -> bool:
    """Whether the next solve (of ``incidences`` link incidences) should run compiled.

    True when ``SOLVER`` is "jit"; when the kernel is already loaded in this process; when the problem has
    :data:`JIT_MIN_INCIDENCES` or more; and, where numba's cache holds the kernels
    (:func:`kernels_cached_here`), when numba is already loaded (nothing left to pay) or the numpy solves
    so far have cost :data:`JIT_LOAD_S` more than the kernel would have; where it holds none, once they
    have cost :data:`topologies.numba_cache.COMPILE_S` more (compiling is the price then). False for
    ``SOLVER = "numpy"`` and where numba cannot load (the numpy path is always there). Other kernels of :mod:`sim.network` should ask here too,
    so a process loads numba once, for a reason.

    Examples
    --------
    >>> use_compiled(JIT_MIN_INCIDENCES) == (_compiled_kernel() is not None)
    True
    """
    if SOLVER == "numpy":
        return False
    if SOLVER == "jit" or incidences >= JIT_MIN_INCIDENCES or _KERNEL.get("kernel") is not None:
        return _compiled_kernel() is not None
    # the price of the kernels: loading them from numba's cache, or compiling them where it holds none
    # (the first process after an install: tens of seconds, more than a small run costs on numpy)
    return compiled_pays(_SPENT["numpy_excess_s"], JIT_LOAD_S, kernels_cached_here()) and \
        _compiled_kernel() is not None


@cache  # asked at every numpy event of a run: the answer holds for the process (topologies.numba_cache)
def kernels_cached_here() -> bool:
    """Whether numba's cache holds this package's solver and event kernels (:mod:`topologies.numba_cache`).

    Examples
    --------
    >>> kernels_cached_here() in (True, False)
    True
    """
    folder = Path(__file__).parent
    return all(kernels_cached(str(folder / name)) for name in ("maxmin_numba.py", "events_numba.py"))


def _compiled_kernel() -> Any:
    if "kernel" not in _KERNEL:
        kernels = import_kernels("sim.network.maxmin_numba", forced=SOLVER == "jit")
        _KERNEL["kernel"] = None if kernels is None else kernels.max_min_kernel
    return _KERNEL["kernel"]


def max_min_rates_numpy(flow_ptr: np.ndarray, link_idx: np.ndarray, capacity: np.ndarray,
                        weight: np.ndarray | None = None) -> tuple[np.ndarray, int]:
    """:func:`max_min_rates` in numpy (the fallback, and the reference the compiled kernel is tested on)."""
    flow_ptr = np.asarray(flow_ptr, dtype=np.int64)
    link_idx = np.asarray(link_idx, dtype=np.int64)
    if weight is None:
        weight = np.ones(flow_ptr.size - 1)
    if capacity.size > 4096 and 4 * link_idx.size < capacity.size:
        # a big fabric and few links in use: number them 0..m-1 so that per-link arrays stay small (on
        # small fabrics the sort costs more than it saves)
        used, lk = np.unique(link_idx, return_inverse=True)
        cap = np.asarray(capacity, dtype=np.float64)[used]
    else:
        lk = link_idx.copy()
        cap = np.asarray(capacity, dtype=np.float64)
    # Frozen flows are not compacted away (a handful of flows per solve: the per-call overhead of
    # rebuilding the CSR outweighs the work it saves); their incidences move to a sentinel link ``m``
    # of infinite capacity that always counts as blocked, so they never freeze twice.
    m = cap.size
    residual = np.empty(m + 1)
    residual[:m] = cap
    residual[m] = np.inf
    n = flow_ptr.size - 1
    starts = flow_ptr[:-1] - flow_ptr[0]
    inc_flow = np.repeat(np.arange(n), flow_ptr[1:] - flow_ptr[:-1])
    inc_weight = np.asarray(weight, dtype=np.float64)[inc_flow]
    rates = np.empty(n)
    sentinel_blocked = np.zeros(m + 1, dtype=bool)
    sentinel_blocked[m] = True
    left = n
    iterations = 0
    up = 1.0 + SHARE_RTOL
    with np.errstate(divide="ignore", invalid="ignore"):   # links no flow uses: 0 / 0, never read
        while True:
            iterations += 1
            inc_share = (residual / np.bincount(lk, weights=inc_weight, minlength=m + 1))[lk]
            flow_min = np.minimum.reduceat(inc_share, starts)     # each flow's tightest link
            # A link is a local bottleneck when its share is the smallest on every flow crossing it; then
            # all those flows saturate it together at that share (the global minimum always qualifies).
            blocked = sentinel_blocked.copy()
            blocked[lk[(flow_min * up)[inc_flow] < inc_share]] = True
            frozen = ~np.logical_and.reduceat(blocked[lk], starts)   # crosses a local bottleneck
            # A frozen flow gets its own minimum (<= every share on its path), so no link overflows even
            # when several near-equal bottlenecks freeze in the same pass.
            given = flow_min[frozen]
            rates[frozen] = given
            left -= given.size
            if not left:
                break
            taken = np.where(frozen, flow_min, 0.0)[inc_flow] * inc_weight
            residual -= np.bincount(lk, weights=taken, minlength=m + 1)
            np.maximum(residual, 0.0, out=residual)
            lk[frozen[inc_flow]] = m
    return rates, iterations
