"""The TUNING records of a scan as columns keyed by line position and process: all of them in memory
(:func:`tuning_columns`), or replayed from their spill files into one file per process (:func:`spill_tunings`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from traces.arrays import factorize
from traces.formats.nccl import comms as C
from traces.formats.nccl.output import combined_codes
from traces.formats.nccl.scan import FileScan
from traces.formats.nccl.spill import Codes, ProcessStore, SpilledTunings, TuningStore


def tuning_part(f: int, t: dict[str, np.ndarray], proc_code: dict[tuple[str, int], int],
                fixed: dict[tuple[str, int], str]) -> dict[str, np.ndarray]:
    """TUNING records of file ``f`` as columns, with ``pos`` and ``proc`` (process code, -1 when unknown)."""
    # (host, pid) -> process code once per distinct pair (a few), not per line
    codes = combined_codes(factorize(t["host"])[0], t["pid"])  # integer keys: no tuple per line
    first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
    first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
    uniq = zip(t["host"][first].tolist(), t["pid"][first].tolist(), strict=True)
    procs = np.array([proc_code.get((fixed.get(k, k[0]), int(k[1])), -1) for k in uniq], dtype=np.int64)
    return {"pos": (np.int64(f) << C.POS_SHIFT) | t["line"], "proc": procs[codes], "op": t["op"],
            "nbytes": t["nbytes"], "algo": t["algo"], "proto": t["proto"]}


TUNED = ("pos", "proc", "op", "nbytes", "algo", "proto")


def tuning_columns(scans: list[FileScan], proc_code: dict[tuple[str, int], int],
                   fixed: dict[tuple[str, int], str]) -> dict[str, np.ndarray]:
    """All TUNING records as columns (:func:`tuning_part`)."""
    parts = [tuning_part(f, s.tunings, proc_code, fixed) for f, s in enumerate(scans) if len(s.tunings["line"])]
    return {k: np.concatenate([p[k] for p in parts]) if parts else np.empty(0) for k in TUNED}


def spill_tunings(stores: list[TuningStore], proc_code: dict[tuple[str, int], int],
                  fixed: dict[tuple[str, int], str], folder: Path) -> SpilledTunings:
    """Replay each file's spilled TUNING records (a block at a time) into one file per process."""
    text = {name: Codes() for name in ("op", "algo", "proto")}
    by_proc = ProcessStore(folder, fields=TUNED, name="tuning")
    for f, store in enumerate(stores):
        for t in store.chunks():
            part = tuning_part(f, t, proc_code, fixed)
            for name, codes in text.items():
                part[name] = codes.encode(part[name])
            order = np.argsort(part["proc"], kind="stable")
            cuts = np.flatnonzero(np.diff(part["proc"][order])) + 1
            for idx in np.split(order, cuts):
                by_proc.add(int(part["proc"][idx[0]]), part, idx)
    return SpilledTunings(by_proc, text)


__all__ = ["TUNED", "spill_tunings", "tuning_columns", "tuning_part"]
