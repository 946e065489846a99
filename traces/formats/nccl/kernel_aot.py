"""The compiled chunk reader built ahead of time: a Python extension module that needs no numba to load.

A new process pays ~0.7 s of CPU to import numba and load the JIT kernel of
:mod:`traces.formats.nccl.kernel_numba` from numba's cache (numba's import and its typing and lowering
registries, not the kernel itself; measured on the ingest benchmark). numba's ahead-of-time compiler
(``numba.pycc``) turns the same functions into an extension module that imports in ~1 ms without numba and
gives the same arrays (tested). It holds the GIL while it runs (``pycc`` has no ``nogil``), so
:mod:`traces.formats.nccl.scan_numba` runs it on the calling thread.

The module is built once per kernel source (:func:`build`: ``python -m traces.formats.nccl.kernel_aot``;
numba, setuptools and a C compiler needed then, ~10 s of CPU); ``simrun ingest`` starts that build in a
detached low-priority process after an ingest that had to load numba's JIT kernel
(:func:`build_in_background`; ``COLLSIM_KERNEL_BUILD=0`` turns it off). Its name carries a hash of the
sources it was compiled from (:func:`module_key`), so an edited kernel never loads a stale build. Where it is
missing, the JIT kernel is used as before.

Examples
--------
>>> len(module_key())
16
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import numpy as np

from traces.background import BUILD_ENV, start_detached

__all__ = ["BUILD_ENV", "DIR_ENV", "ENTRY_POINTS", "build", "build_dirs", "build_in_background", "load", "module_key",
           "module_name"]

#: The functions of :mod:`traces.formats.nccl.kernel_numba` the module exports (the callers' whole use).
ENTRY_POINTS = ("scan_chunk", "span_hashes", "spans_equal")
_HERE = Path(__file__).resolve().parent
#: The sources compiled into the module (the kernel, its field readers, its columns, and the op names frozen
#: into its tables).
_SOURCES = ("kernel_numba.py", "kernel_fields.py", "kernel_cols.py", "layout.py")
#: Environment variable naming a folder to build into and load from before the default ones.
DIR_ENV = "COLLSIM_KERNEL_DIR"
#: A lock file older than this is a builder that died (a build takes well under a minute of CPU).
_STALE_LOCK_S = 3600.0
#: Result of :func:`load` in this process (False: looked for and not found).
_LOADED: dict[str, ModuleType | bool] = {}


def module_key() -> str:
    """16 hex digits of a hash of the kernel's sources, numpy's major version and the Python ABI."""
    digest = hashlib.sha256()
    for name in _SOURCES:
        digest.update((_HERE / name).read_bytes())
    digest.update(f"{np.__version__.split('.')[0]}|{sysconfig.get_config_var('EXT_SUFFIX')}".encode())
    return digest.hexdigest()[:16]


def module_name() -> str:
    """The extension module's name for the current sources (``nccl_kernel_<key>``)."""
    return f"nccl_kernel_{module_key()}"


def build_dirs() -> list[Path]:
    """Folders searched for the module, in order: ``$COLLSIM_KERNEL_DIR``, the ``__pycache__`` beside this
    file (numba's JIT cache is there too), ``~/.cache/collsim``."""
    dirs = [Path(os.environ[DIR_ENV])] if os.environ.get(DIR_ENV) else []
    return [*dirs, _HERE / "__pycache__", Path.home() / ".cache" / "collsim"]


def load() -> ModuleType | None:
    """The built module for the current sources, imported (once per process), or None when none is built
    or it does not load."""
    name = module_name()
    if name in _LOADED:
        found = _LOADED[name]
        return found if isinstance(found, ModuleType) else None
    _LOADED[name] = False
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    for folder in build_dirs():
        path = folder / f"{name}{suffix}"
        if not path.is_file():
            continue
        try:
            loader = importlib.machinery.ExtensionFileLoader(name, str(path))
            spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            module = importlib.util.module_from_spec(spec)
            loader.exec_module(module)
        except Exception:  # noqa: BLE001 - a broken or foreign build: the JIT kernel does the work
            continue
        if all(hasattr(module, f) for f in ENTRY_POINTS):
            _LOADED[name] = module
            return module
    return None


def build(folder: Path | None = None) -> Path:
    """Compile the kernel's entry points ahead of time into ``folder`` (default: the first writable one of
    :func:`build_dirs`); the file appears whole or not at all (built aside, then renamed).

    Returns
    -------
    Path
        The extension module written.

    Raises
    ------
    OSError
        When no folder is writable; numba's and the C compiler's errors pass through.
    """
    import warnings

    from numba import types as nt

    with warnings.catch_warnings():  # pycc is "pending deprecation" in numba 0.57+; it is what builds this
        warnings.simplefilter("ignore")
        from numba.pycc import CC

    from traces.formats.nccl import kernel_numba as J

    target = folder if folder is not None else _writable(build_dirs())
    target.mkdir(parents=True, exist_ok=True)
    name = module_name()
    chunk = nt.Array(nt.uint8, 1, "C", readonly=True)
    ints = nt.Array(nt.int64, 1, "C")
    mat = nt.Array(nt.int64, 2, "C")
    signatures = {
        "scan_chunk": nt.Tuple((mat, nt.Array(nt.uint64, 2, "C"), mat, mat, nt.int64))(chunk),
        "span_hashes": nt.Array(nt.uint64, 1, "C")(chunk, ints, ints),
        "spans_equal": nt.boolean(chunk, ints, ints, ints, ints),
    }
    with tempfile.TemporaryDirectory(dir=target, prefix=".build-") as tmp:
        cc = CC(name)
        cc.output_dir = tmp
        cc.verbose = False
        for entry in ENTRY_POINTS:
            cc.export(entry, signatures[entry])(getattr(J, entry).py_func)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cc.compile()
        built = next(Path(tmp).glob(f"{name}*"))
        out = target / built.name
        os.replace(built, out)
    _LOADED.pop(name, None)
    return out


def build_in_background() -> bool:
    """Start :func:`build` in a detached, low-priority process when this process uses numba's JIT kernel
    (it was imported) and no module is built for the current sources, so the next process loads in ~1 ms
    what this one loaded in ~0.7 s. A lock file beside the module keeps it to one builder at a time.

    Returns
    -------
    bool
        Whether a build was started.
    """
    if os.environ.get(BUILD_ENV, "1") == "0" or "traces.formats.nccl.kernel_numba" not in sys.modules:
        return False
    if load() is not None or importlib.util.find_spec("numba.pycc") is None:
        return False
    try:
        folder = _writable(build_dirs())
    except OSError:
        return False
    lock = folder / f".{module_name()}.lock"
    if lock.with_suffix(".failed").exists():  # a build of these sources failed here: not again at every run
        return False
    # the package root as working folder: `-m` then imports these very sources
    return start_detached([sys.executable, "-m", "traces.formats.nccl.kernel_aot", str(folder), "--lock", str(lock)],
                          _HERE.parents[2], lock, _STALE_LOCK_S)


def _writable(dirs: list[Path]) -> Path:
    for folder in dirs:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(folder, os.W_OK):
            return folder
    raise OSError(f"no writable folder for the compiled kernel among {', '.join(map(str, dirs))}")


def _main(argv: list[str]) -> None:
    """``python -m traces.formats.nccl.kernel_aot [FOLDER] [--lock FILE]``: build, print the path (``--lock``:
    a background build at low priority, which removes its lock file when done and leaves ``.failed`` beside
    it when the build fails)."""
    lock = None
    if "--lock" in argv:
        k = argv.index("--lock")
        lock = Path(argv[k + 1])
        argv = argv[:k] + argv[k + 2:]
        os.nice(10)
    try:
        sys.stdout.write(f"{build(Path(argv[0]) if argv else None)}\n")
    except Exception as exc:
        if lock is not None:  # remembered, so later runs do not start the same failing build
            lock.with_suffix(".failed").write_text(f"{type(exc).__name__}: {exc}\n")
        raise
    finally:
        if lock is not None:
            lock.unlink(missing_ok=True)


if __name__ == "__main__":
    _main(sys.argv[1:])
