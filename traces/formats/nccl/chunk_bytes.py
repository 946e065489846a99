"""A chunk of log text as numpy bytes (:class:`Chunk`): where a literal occurs, the line of a position,
fixed-width gathers, and numbers and distinct tokens read from byte spans, all vectorised.

:mod:`traces.formats.nccl.kernel_numpy` reads the COLL and TUNING fields with these.
"""

from __future__ import annotations

import numpy as np

from traces.arrays import factorize

#: Space positions per window of :attr:`Chunk.sp` (one more than the 24 tokens of the longest COLL layout
#: of :data:`traces.formats.nccl.kernel_numpy.LAYOUTS`, to tell "too many tokens").
SPACE_WINDOW = 25
#: Bytes of zero padding after a chunk, so fixed-width gathers never run past the end.
PAD = 64
_HEX = np.full(256, 255, dtype=np.uint8)
for _k, _c in enumerate(b"0123456789abcdef"):
    _HEX[_c] = _k
for _k, _c in enumerate(b"ABCDEF"):
    _HEX[_c] = 10 + _k
#: Powers of ten of an int64 (reading decimal digits).
POW10 = 10 ** np.arange(19, dtype=np.int64)
#: Below this many occurrences in a chunk, :meth:`Chunk.find` loops over ``bytes.find``.
_FIND_LOOP_MAX = 1000


class Chunk:
    """One chunk of complete lines, with newline and space positions for positional lookups.

    Attributes
    ----------
    buf, arr, n : bytes, numpy.ndarray of uint8, int
        The text, its bytes followed by :data:`PAD` zeros, and its length.
    ends, sp : numpy.ndarray of int64
        Where each line ends (its newline, or the end of the chunk) and every space.
    sp_windows : numpy.ndarray
        ``sp_windows[k]``: the :data:`SPACE_WINDOW` space positions from the k-th on (padded past every
        line end), so the tokens of a COLL body are one row.

    Examples
    --------
    >>> ch = Chunk(b"a 12\\nbb 0x1f\\n")
    >>> ch.line_of(np.array([6])).tolist(), ch.decimal(np.array([2]), np.array([4]))[0].tolist()
    ([1], [12])
    """

    def __init__(self, buf: bytes):
        self.buf = buf
        self.n = len(buf)
        self.arr = np.frombuffer(buf + bytes(PAD), dtype=np.uint8)
        real = self.arr[: self.n]
        ends = np.flatnonzero(real == 10)
        if self.n and (len(ends) == 0 or ends[-1] != self.n - 1):
            ends = np.append(ends, self.n)
        self.ends = ends  # line i ends (exclusive, at its newline) at ends[i]
        self.sp = np.flatnonzero(real == 32)
        # Space positions padded with a value past every line end, read as windows (see coll_fields).
        self.sp_windows = np.lib.stride_tricks.sliding_window_view(
            np.concatenate([self.sp, np.full(SPACE_WINDOW + 2, self.n + 1, dtype=self.sp.dtype)]), SPACE_WINDOW)
        self._where: dict[int, np.ndarray] = {}
        self._windows = np.lib.stride_tricks.sliding_window_view(self.arr, PAD)

    def find(self, literal: bytes, anchor: int) -> np.ndarray:
        """Start positions of ``literal``: candidates where its byte ``anchor`` occurs, then verified.

        Literals that are absent or rare in the chunk (Init, version, ring lines) are found by the C substring
        search instead: a count is far cheaper than a numpy pass over the whole chunk.
        """
        if self.buf.count(literal) < _FIND_LOOP_MAX:
            out = []
            pos = self.buf.find(literal)
            while pos >= 0:  # overlapping hits too, as the numpy path finds them
                out.append(pos)
                pos = self.buf.find(literal, pos + 1)
            return np.array(out, dtype=np.int64)
        byte = literal[anchor]
        if byte not in self._where:  # ": opCount " and "Channel " share their 'C' pass
            self._where[byte] = np.flatnonzero(self.arr[: self.n] == byte)
        cand = self._where[byte] - anchor
        cand = cand[(cand >= 0) & (cand + len(literal) <= self.n)]
        # First and last byte by single lookups (cheap) before the full comparison of the survivors.
        cand = cand[(self.arr[cand] == literal[0]) & (self.arr[cand + len(literal) - 1] == literal[-1])]
        return cand[self.equals(cand, cand + len(literal), literal)]

    def line_of(self, pos: np.ndarray) -> np.ndarray:
        """Line index (0-based) of each byte position."""
        return np.searchsorted(self.ends, pos)

    def line_bounds(self, li: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, end) byte positions of lines ``li``, a trailing CR left out."""
        start = np.where(li > 0, self.ends[np.maximum(li - 1, 0)] + 1, 0)
        end = self.ends[li].copy()
        cr = (end > start) & (self.arr[np.maximum(end - 1, 0)] == 13)
        end[cr] -= 1
        return start, end

    def line_text(self, i: int) -> str:
        """Line ``i`` as text (invalid UTF-8 replaced, a trailing CR left out)."""
        start = int(self.ends[i - 1]) + 1 if i > 0 else 0
        return self.buf[start: int(self.ends[i])].decode("utf-8", "replace").rstrip("\r")

    def gather(self, start: np.ndarray, width: int) -> np.ndarray:
        """(rows x width) bytes from each start; a start outside the chunk reads the zero padding."""
        start = np.where((start < 0) | (start > self.n), self.n, start)
        if width <= PAD:
            # Rows of a strided window view: one small copy per row, no (rows x width) index matrix.
            return self._windows[start, :width]
        return self.arr[start[:, None] + np.arange(width)]

    def equals(self, start: np.ndarray, end: np.ndarray, word: bytes) -> np.ndarray:
        """Whether each [start, end) holds exactly ``word``."""
        ok = (end - start) == len(word)
        return ok & (self.gather(start, len(word)) == np.frombuffer(word, dtype=np.uint8)).all(axis=1)

    def decimal(self, start: np.ndarray, end: np.ndarray, width: int = 18) -> tuple[np.ndarray, np.ndarray]:
        """Signed decimal integers in [start, end) of at most ``width`` digits; mask of well-formed rows."""
        neg = self.arr[np.minimum(start, self.n)] == 45
        start = start + neg
        length = end - start
        ok = (length >= 1) & (length <= width)
        width = int(min(width, max(int(length.max(initial=1)), 1)))  # gather only as wide as needed
        digits = self.gather(start, width).astype(np.int64) - 48
        inside = np.arange(width) < length[:, None]
        ok &= ((digits >= 0) & (digits <= 9) | ~inside).all(axis=1)
        power = POW10[np.clip(length[:, None] - 1 - np.arange(width), 0, 18)]
        value = (np.where(inside, digits, 0) * power).sum(axis=1)
        return np.where(neg, -value, value), ok

    def hexnum(self, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Hex integers (no ``0x``) in [start, end), as uint64; mask of well-formed rows."""
        length = end - start
        ok = (length >= 1) & (length <= 16)
        width = int(min(16, max(int(length.max(initial=1)), 1)))
        nib = _HEX[self.gather(start, width)].astype(np.uint64)
        inside = np.arange(width) < length[:, None]
        ok &= ((nib < 16) | ~inside).all(axis=1)
        shift = (np.clip(length[:, None] - 1 - np.arange(width), 0, 15) * 4).astype(np.uint64)
        value = np.bitwise_or.reduce(np.where(inside, nib << shift, np.uint64(0)), axis=1)
        return value, ok


def distinct_tokens(ch: Chunk, start: np.ndarray, end: np.ndarray, max_width: int = 64) -> tuple[np.ndarray, list]:
    """Codes and distinct values (bytes) of the tokens [start, end) (empty where end <= start).

    Tokens up to ``max_width`` bytes are compared as one fixed-width numpy string each (no Python object
    per row); longer ones, or ones holding a NUL byte (numpy strings drop trailing NULs), are sliced one by one.
    """
    length = np.maximum(end - start, 0)
    width = -(-int(length.max(initial=0)) // 8) * 8  # whole 8-byte words
    if 0 < width <= max_width:
        mat = ch.gather(start, width)
        outside = np.arange(width) >= length[:, None]
        if not ((mat == 0) & ~outside).any():
            mat[outside] = 0
            # Hash-factorize the tokens 8 bytes at a time (pandas' hash table, no sort, no object per row).
            words = mat.view(np.uint64)
            codes = factorize(words[:, 0])[0]
            for j in range(1, words.shape[1]):
                more = factorize(words[:, j])[0]
                codes = factorize(codes * (int(more.max()) + 1) + more)[0]
            first = np.zeros(int(codes.max()) + 1, dtype=np.int64)
            first[codes[::-1]] = np.arange(len(codes) - 1, -1, -1)
            uniq = [mat[i, : length[i]].tobytes() for i in first.tolist()]
            return codes, uniq
    buf = ch.buf
    tokens = [buf[a:z] for a, z in zip(start.tolist(), end.tolist(), strict=True)]
    codes, uniq = factorize(np.array(tokens, dtype=object))
    return codes, list(uniq)


__all__ = ["Chunk", "PAD", "POW10", "distinct_tokens"]
