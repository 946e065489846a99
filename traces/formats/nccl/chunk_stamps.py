"""Outer timestamps of log lines (``[%F %T.%Nf]`` of NCCL 2.26, an external ``%F %T.%f``) read positionally
from a chunk's bytes (:func:`outer_timestamps`); any other outer text is parsed once per distinct text by
the per-line parser (:func:`text_timestamps`).
"""

from __future__ import annotations

import numpy as np

from traces.arrays import factorize
from traces.formats.nccl import layout as L
from traces.formats.nccl.chunk_bytes import POW10, Chunk

NO_TS = np.iinfo(np.int64).min


def outer_timestamps(ch: Chunk, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Microseconds since the epoch of the timestamp in each outer prefix [start, end); NO_TS when none.

    The NCCL 2.26 ``[%F %T.%Nf]`` and external ``%F %T.%f`` layouts are read positionally; any other outer
    text (a launcher tag, a tag before the stamp) goes to the per-line parser once per distinct text.
    """
    br = ch.arr[np.minimum(start, ch.n)] == 91  # '['
    s = start + br
    e = end - (ch.arr[np.maximum(end - 1, 0)] == 93)
    m = ch.gather(s, 26)
    d = m - np.uint8(48)  # digits become 0..9; anything else wraps to >= 10
    ok = (e - s >= 19) & (m[:, 4] == 45) & (m[:, 7] == 45) & ((m[:, 10] == 32) | (m[:, 10] == 84))
    ok &= (m[:, 13] == 58) & (m[:, 16] == 58)
    ok &= (d[:, [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]] <= 9).all(axis=1)
    di = d[:, :19].astype(np.int64)
    year = di[:, 0] * 1000 + di[:, 1] * 100 + di[:, 2] * 10 + di[:, 3]
    month, day = di[:, 5] * 10 + di[:, 6], di[:, 8] * 10 + di[:, 9]
    secs = (di[:, 11] * 10 + di[:, 12]) * 3600 + (di[:, 14] * 10 + di[:, 15]) * 60 + di[:, 17] * 10 + di[:, 18]
    flen = np.clip(e - s - 20, 0, 6)
    has_frac = e - s > 19
    ok &= ~has_frac | ((m[:, 19] == 46) | (m[:, 19] == 44)) & (e - s <= 26)
    fd = d[:, 20:26]
    inside = np.arange(6) < flen[:, None]
    ok &= ((fd <= 9) | ~inside).all(axis=1)
    frac = (np.where(inside, fd, 0).astype(np.int64) * POW10[5 - np.arange(6)]).sum(axis=1)
    out = _days_from_civil(year, month, day) * 86_400_000_000 + secs * 1_000_000 + frac
    out = np.where(ok, out, NO_TS)
    rest = np.flatnonzero(~ok)
    if len(rest):
        out[rest] = text_timestamps(ch.buf, start[rest], end[rest])
    return out


def text_timestamps(buf: bytes, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """:func:`nccl_log_lines.timestamp_us` of each text ``buf[start:end]`` (NO_TS when none), parsed once per
    distinct text: the outer prefixes the fixed layouts cannot read."""
    texts = [buf[a:z] for a, z in zip(start.tolist(), end.tolist(), strict=True)]
    codes, uniq = factorize(np.array(texts, dtype=object))
    vals = [L.timestamp_us(u.decode("utf-8", "replace")) for u in uniq]
    return np.array([NO_TS if v is None else v for v in vals], dtype=np.int64)[codes]


def _days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm), vectorised."""
    y = y - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    doy = (153 * (m + np.where(m > 2, -3, 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


__all__ = ["NO_TS", "outer_timestamps", "text_timestamps"]
