"""topologies.numba_cache: when numba's cache counts as holding a module's kernels."""

from __future__ import annotations

import os
import sys

from topologies.numba_cache import kernels_cached


def test_an_index_older_than_its_source_does_not_count(tmp_path, monkeypatch):
    # numba discards an index whose source stamp changed and compiles: such an index is not a cache
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    source = tmp_path / "kernels.py"
    source.write_text("x = 1\n")
    index = tmp_path / "__pycache__" / f"kernels.f-3.py{sys.version_info.major}{sys.version_info.minor}.nbi"
    index.parent.mkdir()
    index.write_bytes(b"")
    t = source.stat().st_mtime
    os.utime(index, (t + 10, t + 10))
    assert kernels_cached.__wrapped__(str(source))   # the answer is cached per process: ask the function
    os.utime(index, (t - 10, t - 10))  # the source changed after the kernels were cached
    assert not kernels_cached.__wrapped__(str(source))
