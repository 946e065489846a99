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

import os
import sys
from functools import cache
from pathlib import Path

__all__ = ["COMPILE_S", "kernels_cached"]

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
        Whether an index file of that module is in numba's cache folder.

    Examples
    --------
    >>> kernels_cached("/nonexistent/folder/kernels.py")
    False
    """
    source = Path(module_file)
    pattern = f"{source.stem}.*.py{sys.version_info.major}{sys.version_info.minor}.nbi"
    user_dir = os.environ.get("NUMBA_CACHE_DIR")
    if user_dir:
        return any(Path(user_dir).glob(f"**/{pattern}"))
    in_tree = source.parent / "__pycache__"
    if any(in_tree.glob(pattern)):
        return True
    if source.parent.is_dir() and not os.access(source.parent, os.W_OK):
        # a read-only install: numba's user-wide folder (its default location, without importing numba)
        base = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "numba"
        return any(base.glob(f"**/{pattern}"))
    return False
