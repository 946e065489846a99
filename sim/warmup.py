"""Fill numba's cache in the background after a run that would have used the compiled kernels.

The first process after an install finds numba's cache empty, so the size rules
(:func:`sim.network.maxmin.use_compiled`, :mod:`topologies.numba_cache`) keep it on the numpy paths: the
same results, bit for bit, but a main job of ~16 s instead of the 10-13 s it takes with the kernels loaded.
Compiling them is 40-65 s of CPU, which no small run should wait for. So when a run's numpy solves cost more
than loading cached kernels would have (:func:`sim.network.maxmin.numpy_excess_charged_s` above
:data:`sim.network.maxmin.JIT_LOAD_S`) and the cache is cold, :func:`warm_in_background` starts a detached,
low-priority process (``python -m sim.warmup``) that replays the built-in DeepSeek-V3 trace with every kernel
forced, which compiles and caches them; the next run loads them. It is the simulator's twin of the NCCL
reader's ahead-of-time kernel build (:mod:`traces.formats.nccl.kernel_aot`) and obeys the same switch:
``COLLSIM_KERNEL_BUILD=0`` turns it off. A lock file keeps it to one warm-up at a time.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

from sim.option_values import DEFAULT_QUANTILE
from traces.background import BUILD_ENV, start_detached

__all__ = ["BUILD_ENV", "lock_path", "should_warm", "warm_in_background", "warm_up"]

#: a lock older than this is a warm-up that died (it takes ~1-2 minutes of CPU on 2 cores)
_STALE_LOCK_S = 900.0
_ROOT = Path(__file__).resolve().parents[1]


def lock_path() -> Path:
    """The warm-up's lock file: in the temp folder, named after this source tree (one per install).

    Examples
    --------
    >>> lock_path().name.startswith("collsim-warmup-")
    True
    """
    key = hashlib.sha1(str(_ROOT).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"collsim-warmup-{key}.lock"


def should_warm() -> bool:
    """Whether this process's run is one that a warm cache would have sped up, and the cache is cold.

    True when background builds are allowed (``COLLSIM_KERNEL_BUILD`` is not "0"), numba was not loaded
    in this process (a loaded numba has compiled or loaded the kernels already), the solver setting is
    "auto", numba's cache lacks the network's kernels, and the numpy solves of this process cost more than
    loading the cached kernels would have.

    Returns
    -------
    bool

    Examples
    --------
    >>> should_warm() in (True, False)
    True
    """
    if os.environ.get(BUILD_ENV, "1") == "0" or "numba" in sys.modules:
        return False
    from sim.network import maxmin

    if maxmin.SOLVER != "auto" or maxmin.kernels_cached_here():
        return False
    return maxmin.numpy_excess_charged_s() >= maxmin.JIT_LOAD_S


def warm_in_background(quantile: float) -> bool:
    """Start :func:`warm_up` in a detached, low-priority process when :func:`should_warm` says so.

    Parameters
    ----------
    quantile : float
        The completion batching the caller ran with (the CLI's default), so the warm-up compiles the same
        event kernels.

    Returns
    -------
    bool
        Whether a warm-up was started (False when one is already running or was not needed).
    """
    if not should_warm():
        return False
    # the package root as working folder: `-m` then imports these very sources
    argv = [sys.executable, "-m", "sim.warmup", "--quantile", repr(float(quantile)), "--lock", str(lock_path())]
    return start_detached(argv, _ROOT, lock_path(), _STALE_LOCK_S)


def warm_up(quantile: float) -> None:
    """Replay the built-in DeepSeek-V3 trace with the compiled solver, event kernels and route walk forced,
    with completion batching ``quantile``, so numba compiles and caches every kernel it uses.

    The replay's result is discarded; it only exists to give numba the argument types of a real run (a
    kernel is compiled per signature, whatever the sizes).
    """
    from sim.network import maxmin
    from sim.options import SimOptions
    from sim.replay import simulate
    from topologies import routing
    from traces.io import read_trace

    maxmin.SOLVER = "jit"
    routing.WALK = "jit"
    simulate(read_trace("ds_v3.parquet"), "fat_tree", options=SimOptions(completion_quantile=quantile))


def _main(argv: list[str]) -> None:
    """``python -m sim.warmup [--quantile Q] [--lock FILE]``: warm numba's cache (``--lock``: at low
    priority, removing the lock file when done)."""
    lock = Path(argv[argv.index("--lock") + 1]) if "--lock" in argv else None
    quantile = float(argv[argv.index("--quantile") + 1]) if "--quantile" in argv else DEFAULT_QUANTILE
    if lock is not None:
        os.nice(10)
    try:
        warm_up(quantile)
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
