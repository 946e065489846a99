"""Whether numba's on-disk cache already holds a module's compiled kernels (the ski rental's price).

collsim's compiled kernels (``cache=True``) cost a fresh process about 0.75 s of CPU to import numba and
load their cached machine code, but the first process after an install or an edit *compiles* them: 40-65 s
of CPU for the network's event kernels (the main job, measured from a fresh clone). The size rules
(:func:`sim.network.maxmin.use_compiled`, :func:`topologies.routing.use_compiled_walk`) charge the load
figure only where the cache is warm, and the compile figure otherwise, so a small first run stays on the
numpy paths (the same results, bit for bit, tested) instead of spending a minute compiling; a run big
enough to need the kernels compiles them once, and every later process loads them.

numba keeps a kernel's index as ``<module>.<function>-<line>.py<XY>.nbi``: in ``__pycache__`` beside the
source where that folder is writable, under ``$NUMBA_CACHE_DIR`` when it is set, else in its user-wide
cache folder. An index whose source has changed since is stale and numba compiles again: this check then
says "warm" once too often, which costs one compile, as before it existed.
"""

from __future__ import annotations

import importlib
import os
import sys
from functools import cache
from pathlib import Path
from types import ModuleType

__all__ = ["COMPILE_S", "compiled_pays", "import_kernels", "kernels_cached"]

#: CPU seconds a fresh process spends compiling a module's kernels when nothing is cached (the network's
#: event kernels: 40-65 s measured on the 2-core machine; the route walk's: about 10 s). One figure for all:
#: it only has to be far above the load figure for the rule to keep small runs on numpy.
COMPILE_S = 40.0


@cache
def kernels_cached(module_file: str) -> bool:
    """True when numba's cache holds at least one compiled kernel of ``module_file`` for this Python.

    Asked once per process and module (a later compile in this process does not change the answer: by
    then numba is loaded and the kernels are in memory).

    Parameters
    ----------
    module_file : str
        The ``__file__`` of the module whose functions are ``@njit(cache=True)``.

    Returns
    -------
    bool
        Whether an index file of that module, written after the module's last change, is in numba's
        cache folder. numba discards an index whose recorded source stamp (mtime, size) is not the
        source's, and then compiles; an index older than the source is such a one (left by an earlier
        version of the file, e.g. before an upgrade), so it does not count.

    Examples
    --------
    >>> kernels_cached("/nonexistent/folder/kernels.py")
    False
    """
    source = Path(module_file)
    pattern = f"{source.stem}.*.py{sys.version_info.major}{sys.version_info.minor}.nbi"
    try:
        source_mtime = source.stat().st_mtime
    except OSError:
        return False

    def current(paths) -> bool:
        return any(p.stat().st_mtime >= source_mtime for p in paths)

    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if user_dir:
        return current(Path(user_dir).glob(f"**/{pattern}"))
    if current((source.parent / "__pycache__").glob(pattern)):
        return True
    if source.parent.is_dir() and not os.access(source.parent, os.W_OK):
        # a read-only install: numba's user-wide folder (its default location, without importing numba)
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "numba"
        return current(base.glob(f"**/{pattern}"))
    return False


def compiled_pays(numpy_excess_s: float, load_s: float, cached: bool) -> bool:
    """The ski rental of a size rule: whether the numpy path has cost enough to pay for the kernels.

    Where numba's cache holds them, their price is ``load_s`` (nothing once numba is loaded in this
    process); where it holds none, :data:`COMPILE_S`, whether numba is loaded or not (each kernel compiles).

    Parameters
    ----------
    numpy_excess_s : float
        CPU seconds the numpy path has spent so far beyond its compiled twin (estimated).
    load_s : float
        CPU seconds to import numba and load the cached kernels in a fresh process.
    cached : bool
        :func:`kernels_cached` for the kernels' modules.

    Returns
    -------
    bool

    Examples
    --------
    >>> compiled_pays(1.0, 0.75, cached=True), compiled_pays(1.0, 0.75, cached=False)
    (True, False)
    """
    if cached:
        return "numba" in sys.modules or numpy_excess_s >= load_s
    return numpy_excess_s >= COMPILE_S


def import_kernels(module: str, forced: bool) -> ModuleType | None:
    """Import a module of compiled kernels, or None where numba is missing or cannot compile here.

    Parameters
    ----------
    module : str
        Dotted name (``"topologies.routing_numba"``).
    forced : bool
        The caller's setting asks for the kernels ("jit"): an import failure is raised, not hidden.

    Returns
    -------
    module or None

    Examples
    --------
    >>> import_kernels("topologies.no_such_kernels", forced=False) is None
    True
    """
    try:
        return importlib.import_module(module)
    except Exception:  # noqa: BLE001 - no numba (or it cannot compile here): the caller's numpy path
        if forced:
            raise
        return None
