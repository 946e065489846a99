"""The compiled chunk reader built ahead of time (traces.formats.nccl.kernel_aot): chosen when built, the same
arrays and traces as numba's JIT kernel, a build started at most once in the background, and the
serial (no kernel threads) scan it uses equal to the threaded one."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from traces.formats.nccl import kernel_aot
from traces.formats.nccl import scan as nccl_log_scan
from traces.formats.nccl.reader import read_nccl_logs
from traces.schema import TraceError

LOGS = sorted((Path(__file__).resolve().parents[3] / "data" / "nccl_logs").glob("*.log"))


def _chunk(path: Path) -> np.ndarray:
    return np.frombuffer(path.read_bytes(), dtype=np.uint8)


def _same_kernel_output(left: tuple, right: tuple) -> bool:
    """Equal arrays, where they hold something: a row the kernel could not read (OK column 0) has only its
    line, start, end and OK set (the rest is uninitialised memory, which the callers never read)."""
    for k in (0, 2):  # the COLL and TUNING matrices; their first four columns: line, start, end, OK
        for out in (left, right):
            out[k][out[k][:, 3] == 0, 4:] = 0
    return all(np.array_equal(a, b) for a, b in zip(left[:4], right[:4], strict=True)) and left[4] == right[4]


def test_module_key_follows_the_sources(tmp_path, monkeypatch):
    for name in ("kernel_numba.py", "kernel_fields.py", "kernel_cols.py", "layout.py"):
        (tmp_path / name).write_bytes((Path(kernel_aot.__file__).parent / name).read_bytes())
    monkeypatch.setattr(kernel_aot, "_HERE", tmp_path)
    key = kernel_aot.module_key()
    assert key == kernel_aot.module_key() and len(key) == 16
    with open(tmp_path / "layout.py", "a") as fh:  # the op names are frozen into the module's tables
        fh.write("\n# edited\n")
    assert kernel_aot.module_key() != key
    assert kernel_aot.module_name() == f"nccl_kernel_{kernel_aot.module_key()}"


def test_missing_or_broken_builds_load_as_none(tmp_path, monkeypatch):
    monkeypatch.setattr(kernel_aot, "_LOADED", {})
    monkeypatch.setattr(kernel_aot, "build_dirs", lambda: [tmp_path])
    assert kernel_aot.load() is None
    suffix = kernel_aot.sysconfig.get_config_var("EXT_SUFFIX")
    (tmp_path / f"{kernel_aot.module_name()}{suffix}").write_bytes(b"not an extension module")
    monkeypatch.setattr(kernel_aot, "_LOADED", {})
    assert kernel_aot.load() is None


@pytest.mark.parametrize(("engine", "built", "expected"), [
    ("auto", True, "aot"), ("aot", True, "aot"), ("jit", True, "jit"), ("auto", False, "jit")])
def test_compiled_kernel_choice(monkeypatch, engine, built, expected):
    pytest.importorskip("numba")
    fake = SimpleNamespace(__name__="nccl_kernel_fake")
    monkeypatch.setattr(nccl_log_scan, "ENGINE", engine)
    monkeypatch.setattr(kernel_aot, "load", lambda: fake if built else None)
    chosen = nccl_log_scan.compiled_kernel()
    assert (chosen is fake) == (expected == "aot")
    assert nccl_log_scan.use_jit(1 << 40)


def test_forced_aot_without_a_build_says_how_to_build(monkeypatch):
    monkeypatch.setattr(nccl_log_scan, "ENGINE", "aot")
    monkeypatch.setattr(kernel_aot, "load", lambda: None)
    with pytest.raises(TraceError, match="python -m traces.formats.nccl.kernel_aot"):
        nccl_log_scan.use_jit(0)


def test_a_big_input_takes_the_built_kernel_without_numba(monkeypatch):
    monkeypatch.setattr(nccl_log_scan, "ENGINE", "auto")
    modules = dict(sys.modules)
    modules.pop("traces.formats.nccl.kernel_numba", None)
    monkeypatch.setattr(nccl_log_scan.sys, "modules", modules)
    monkeypatch.setattr(kernel_aot, "load", lambda: SimpleNamespace(__name__="nccl_kernel_fake"))
    monkeypatch.setattr(nccl_log_scan.importlib.util, "find_spec", lambda name: None)  # as if numba were missing
    assert nccl_log_scan.use_jit(nccl_log_scan.JIT_MIN_BYTES)
    assert not nccl_log_scan.use_jit(nccl_log_scan.JIT_MIN_BYTES - 1)


def test_background_build_starts_once(tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr(kernel_aot, "load", lambda: None)
    monkeypatch.setattr(kernel_aot, "build_dirs", lambda: [tmp_path])
    monkeypatch.setattr(kernel_aot.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setitem(sys.modules, "traces.formats.nccl.kernel_numba", SimpleNamespace())
    monkeypatch.setattr("subprocess.Popen", lambda argv, **kw: started.append((argv, kw)))
    monkeypatch.delenv(kernel_aot.BUILD_ENV, raising=False)
    assert kernel_aot.build_in_background()
    assert not kernel_aot.build_in_background()  # the first builder holds the lock
    lock = tmp_path / f".{kernel_aot.module_name()}.lock"
    argv, kw = started[0]
    assert len(started) == 1 and lock.exists() and argv[-2:] == ["--lock", str(lock)]
    assert kw["start_new_session"] and Path(kw["cwd"]) == Path(kernel_aot.__file__).resolve().parents[3]
    old = time.time() - 2 * kernel_aot._STALE_LOCK_S  # a builder that died: its lock is taken over
    os.utime(lock, (old, old))
    assert kernel_aot.build_in_background() and len(started) == 2
    lock.unlink()
    lock.with_suffix(".failed").write_text("CompileError: no compiler\n")  # a failed build is not retried
    assert not kernel_aot.build_in_background() and len(started) == 2
    lock.with_suffix(".failed").unlink()
    monkeypatch.setenv(kernel_aot.BUILD_ENV, "0")
    assert not kernel_aot.build_in_background() and len(started) == 2


def test_serial_scan_equals_threaded_scan(monkeypatch, tmp_path):
    """The calling-thread loop the ahead-of-time kernel runs gives what the threaded loop gives (JIT kernel)."""
    pytest.importorskip("numba")
    from traces.formats.nccl import kernel_numba, scan_numba

    monkeypatch.setattr(nccl_log_scan, "ENGINE", "jit")
    monkeypatch.setattr(nccl_log_scan, "CHUNK_BYTES", 512)  # many chunks: the threads run ahead
    big = tmp_path / "all.log"
    big.write_bytes(b"".join(p.read_bytes() for p in LOGS[:5]))
    seen = {}
    real = scan_numba.scan_chunks
    for threads in (0, 2):
        monkeypatch.setattr(scan_numba, "scan_chunks", lambda *a, t=threads, **k: real(*a[:5], kernel_numba, t))
        seen[threads] = read_nccl_logs([big])
    (df0, rep0), (df2, rep2) = seen[0], seen[2]
    assert len(df0) > 20 and df0.equals(df2) and rep0.as_dict() == rep2.as_dict()


built = pytest.mark.skipif(kernel_aot.load() is None, reason="no ahead-of-time kernel built for these sources "
                           "(python -m traces.formats.nccl.kernel_aot)")


@built
def test_built_kernel_gives_the_jit_kernels_arrays():
    pytest.importorskip("numba")
    from traces.formats.nccl import kernel_numba

    aot = kernel_aot.load()
    for path in LOGS:
        a = _chunk(path)
        assert _same_kernel_output(aot.scan_chunk(a), kernel_numba.scan_chunk(a)), path.name
        s = np.arange(0, len(a) - 8, 7, dtype=np.int64)
        assert np.array_equal(aot.span_hashes(a, s, s + 8), kernel_numba.span_hashes(a, s, s + 8))
        assert aot.spans_equal(a, s, s + 8, s, s + 8) and not aot.spans_equal(a, s[1:], s[1:] + 8, s[:-1], s[:-1] + 8)


@built
@pytest.mark.parametrize("path", LOGS[:2], ids=lambda p: p.name)
def test_built_kernel_gives_the_same_traces(path, monkeypatch):
    pytest.importorskip("numba")
    found = {}
    for engine in ("aot", "jit"):
        monkeypatch.setattr(nccl_log_scan, "ENGINE", engine)
        try:
            df, report = read_nccl_logs([path])
            found[engine] = (df, report.as_dict(), df.attrs["collsim"])
        except TraceError as exc:
            found[engine] = str(exc)
    if isinstance(found["jit"], str):
        assert found["aot"] == found["jit"]
    else:
        assert found["aot"][0].equals(found["jit"][0]) and found["aot"][1:] == found["jit"][1:]


@pytest.mark.slow
def test_build_from_scratch_matches_the_jit_kernel(tmp_path, monkeypatch):
    pytest.importorskip("numba.pycc")
    from traces.formats.nccl import kernel_numba

    out = kernel_aot.build(tmp_path)
    assert out.parent == tmp_path and out.name.startswith(kernel_aot.module_name())
    assert not list(tmp_path.glob(".build-*"))  # the build folder is gone, the module renamed in whole
    monkeypatch.setattr(kernel_aot, "_LOADED", {})
    monkeypatch.setattr(kernel_aot, "build_dirs", lambda: [tmp_path])
    aot = kernel_aot.load()
    assert aot is not None and aot.__file__ == str(out)
    for path in LOGS:
        a = _chunk(path)
        assert _same_kernel_output(aot.scan_chunk(a), kernel_numba.scan_chunk(a)), path.name


def test_a_failed_background_build_is_remembered_and_its_lock_dropped(tmp_path, monkeypatch):
    lock = tmp_path / ".nccl_kernel_x.lock"
    lock.write_text("")
    monkeypatch.setattr(kernel_aot.os, "nice", lambda n: 0)

    def fail(folder):
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(kernel_aot, "build", fail)
    with pytest.raises(RuntimeError):
        kernel_aot._main([str(tmp_path), "--lock", str(lock)])
    assert not lock.exists() and "no C compiler" in lock.with_suffix(".failed").read_text()
