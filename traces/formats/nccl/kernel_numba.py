"""Compiled (numba) reading of one chunk of NCCL log text: every line classified and the standard COLL and
TUNING lines read: one flat pass over the bytes notes where each line's marks are, then only the lines
holding one are read.

The rules are those of the numpy positional path (:mod:`traces.formats.nccl.kernel_numpy`): the same token layouts,
the same prefix, the same outer timestamps. A line that does not fit them exactly is flagged, and the
caller hands it to the forgiving per-line parser, as before. Text fields come back as byte spans plus a
64-bit hash, so the caller builds one Python string per distinct value, never one per row.

numba compiles these functions on first use and caches the machine code on disk (``cache=True``), so only
the first run after an install pays the compile time.
"""

from __future__ import annotations

import sys

import numpy as np
from numba import njit
from numba import types as nt

# The matrices' columns and the op codes live in a module without numba, for the ahead-of-time build
# (traces.formats.nccl.kernel_aot), whose callers never import numba; re-exported here.
from traces.formats.nccl.kernel_cols import (  # noqa: F401
    C_COLS,
    C_COUNT,
    C_DEV,
    C_DT,
    C_GRANK,
    C_HE,
    C_HS,
    C_LE,
    C_LINE,
    C_LS,
    C_NRANKS,
    C_OE,
    C_OK,
    C_OP,
    C_OS,
    C_PID,
    C_ROOT,
    C_TID,
    C_TS,
    NO_TS,
    OP_LIST,
    OP_NAMES,
    T_AE,
    T_AS,
    T_COLS,
    T_DEV,
    T_HE,
    T_HS,
    T_LE,
    T_LINE,
    T_LS,
    T_NBYTES,
    T_OE,
    T_OK,
    T_OP,
    T_OS,
    T_PE,
    T_PID,
    T_PS,
    T_TID,
    T_TS,
)
from traces.formats.nccl.kernel_cols import distinct_spans as spans_of

# Explicit signatures: one machine-code version per helper (numba would otherwise compile one per literal
# argument it sees, which tripled the first-run compile time).
_A = nt.Array(nt.uint8, 1, "C", readonly=True)  # the chunk's bytes (and the literal tables)
_I = nt.int64
_MAT = nt.Array(nt.uint8, 2, "C", readonly=True)
_LEN = nt.Array(nt.int64, 1, "C", readonly=True)
_OUT = nt.Array(nt.int64, 2, "C")
_U64 = nt.Array(nt.uint64, 2, "C")
_SP = nt.Array(nt.int64, 1, "C")
_B = nt.boolean
#: Op names the COLL/TUNING fast path accepts, as a (names x width) byte matrix (code = row index).
_OP_W = max(len(n) for n in OP_LIST)
OP_MAT = np.zeros((len(OP_LIST), _OP_W), dtype=np.uint8)
OP_LEN = np.array([len(n) for n in OP_LIST], dtype=np.int64)
for _k, _n in enumerate(OP_LIST):
    OP_MAT[_k, : len(_n)] = np.frombuffer(_n.encode(), dtype=np.uint8)

_COLL_MARK = np.frombuffer(b": opCount ", dtype=np.uint8)
_TUNING_MARK = np.frombuffer(b" Bytes -> Algo ", dtype=np.uint8)
_INFO = np.frombuffer(b" NCCL INFO ", dtype=np.uint8)
_ANKS = np.frombuffer(b"anks ", dtype=np.uint8)
_CHANNEL = np.frombuffer(b"Channel ", dtype=np.uint8)
_VERSION = np.frombuffer(b"NCCL version", dtype=np.uint8)
_PROTO = np.frombuffer(b"proto", dtype=np.uint8)
#: COLL keywords, as a (words x width) byte matrix; :func:`_coll` knows their token positions per layout.
_KW = [b"sendbuff", b"recvbuff", b"acc", b"count", b"datatype", b"op", b"root", b"comm", b"stream", b"task",
       b"globalrank"]
_KW_W = max(len(w) for w in _KW)
KW_MAT = np.zeros((len(_KW), _KW_W), dtype=np.uint8)
KW_LEN = np.array([len(w) for w in _KW], dtype=np.int64)
for _k, _w in enumerate(_KW):
    KW_MAT[_k, : len(_w)] = np.frombuffer(_w, dtype=np.uint8)
_MAX_TOK = 25  # more tokens than the longest layout (24) has
#: Byte -> what it may start: 1 newline, 2 ": opCount ", 3 "Bytes -> Algo " (after a space), 4 the 'k' of
#: "anks ", 5 "Channel ", 6 the 'v' of "NCCL version", 7 the 'F' of " NCCL INFO " (two in a line: maybe a
#: line torn by another process's write, which the caller reads with the per-line parsers).
_TRIGGER = np.zeros(256, dtype=np.uint8)
for _c, _k in ((b"\n", 1), (b":", 2), (b"B", 3), (b"k", 4), (b"C", 5), (b"v", 6), (b"F", 7)):
    _TRIGGER[_c[0]] = _k


@njit(_B(_A, _I, _A), cache=True, nogil=True)
def _is(a, pos, lit):
    """True when ``lit`` is at ``a[pos:]``."""
    if pos < 0 or pos + len(lit) > len(a):
        return False
    for j in range(len(lit)):
        if a[pos + j] != lit[j]:
            return False
    return True


@njit(_B(_A, _I, _I, _MAT, _LEN, _I), cache=True, nogil=True)
def _word(a, s, e, mat, length, k):
    """True when [s, e) holds keyword ``k`` of ``mat`` exactly."""
    if e - s != length[k]:
        return False
    for j in range(e - s):
        if a[s + j] != mat[k, j]:
            return False
    return True


@njit(nt.Tuple((_I, _B))(_A, _I, _I, _I), cache=True, nogil=True)
def _decimal(a, s, e, width):
    """(value, ok) of a signed decimal of 1..width digits in [s, e)."""
    neg = s < e and a[s] == 45
    if neg:
        s += 1
    if e - s < 1 or e - s > width:
        return 0, False
    v = 0
    for j in range(s, e):
        d = a[j] - 48
        if d < 0 or d > 9:
            return 0, False
        v = v * 10 + d
    return (-v if neg else v), True


@njit(nt.Tuple((nt.uint64, _B))(_A, _I, _I), cache=True, nogil=True)
def _hex(a, s, e):
    """(value as uint64, ok) of 1..16 hex digits (either case, no ``0x``) in [s, e)."""
    if e - s < 1 or e - s > 16:
        return np.uint64(0), False
    v = np.uint64(0)
    for j in range(s, e):
        c = a[j]
        if 48 <= c <= 57:
            d = c - 48
        elif 97 <= c <= 102:
            d = c - 87
        elif 65 <= c <= 70:
            d = c - 55
        else:
            return np.uint64(0), False
        v = (v << np.uint64(4)) | np.uint64(d)
    return v, True


@njit(_I(_A, _I, _I), cache=True, nogil=True)
def _op_code(a, s, e):
    """Index in OP_LIST of the name exactly in [s, e), else -1."""
    for k in range(OP_MAT.shape[0]):
        if _word(a, s, e, OP_MAT, OP_LEN, k):
            return k
    return -1


@njit(_I(_A, _I, _I), cache=True, nogil=True)
def _prev_space(a, pos, ls):
    """Position of the last space in [ls, pos), else -1."""
    for j in range(pos - 1, ls - 1, -1):
        if a[j] == 32:
            return j
    return -1


@njit(_I(_A, _I, _I), cache=True, nogil=True)
def _digits(a, s, k):
    """The k checked decimal digits at ``a[s:]`` as an integer."""
    v = 0
    for j in range(s, s + k):
        v = v * 10 + (np.int64(a[j]) - 48)
    return v


@njit(_I(_A, _I, _I), cache=True, nogil=True)
def _timestamp(a, s, e):
    """Microseconds since the epoch of an outer ``[%F %T.f]`` / ``%F %T.f`` prefix in [s, e); NO_TS if not one."""
    if s < e and a[s] == 91:
        s += 1
    if e > s and a[e - 1] == 93:
        e -= 1
    n = e - s
    if n < 19 or a[s + 4] != 45 or a[s + 7] != 45 or not (a[s + 10] == 32 or a[s + 10] == 84):
        return NO_TS
    if a[s + 13] != 58 or a[s + 16] != 58:
        return NO_TS
    for j in (0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18):
        if a[s + j] < 48 or a[s + j] > 57:
            return NO_TS
    frac = 0
    if n > 19:
        if not (a[s + 19] == 46 or a[s + 19] == 44) or n > 26:
            return NO_TS
        scale = 100000
        for j in range(s + 20, e):
            v = np.int64(a[j]) - 48
            if v < 0 or v > 9:
                return NO_TS
            frac += v * scale
            scale //= 10
    y = _digits(a, s, 4)
    m = _digits(a, s + 5, 2)
    day = _digits(a, s + 8, 2)
    secs = _digits(a, s + 11, 2) * 3600 + _digits(a, s + 14, 2) * 60 + _digits(a, s + 17, 2)
    # days from civil (H. Hinnant), as the numpy path computes it
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86_400_000_000 + secs * 1_000_000 + frac


@njit(_B(_A, _I, _I, _OUT, _I, _I), cache=True, nogil=True)
def _prefix(a, ls, body, out, i, col):
    """Read ``[outer ]host:pid:tid [dev] NCCL INFO `` ending at ``body`` into row ``i`` of ``out`` (pid, tid,
    host start, host end, ts, outer start, outer end, dev); False when the line has no such prefix.

    ``ts`` is NO_TS with the outer span set when the outer text is not a timestamp the fixed layout reads
    (the caller then parses that text once per distinct value).
    """
    info = body - 11
    if info <= ls or not _is(a, info, _INFO):
        return False
    s1 = _prev_space(a, info, ls)
    if s1 < 0 or a[s1 + 1] != 91:
        return False
    s2 = _prev_space(a, s1, ls)
    hs = s2 + 1 if s2 >= 0 else ls
    c2 = -1
    c1 = -1
    for j in range(s1 - 1, hs - 1, -1):
        if a[j] == 58:
            if c2 < 0:
                c2 = j
            else:
                c1 = j
                break
    if c1 < 0:
        return False
    pid, ok1 = _decimal(a, c1 + 1, c2, 18)
    tid, ok2 = _decimal(a, c2 + 1, s1, 18)
    if not ok1 or not ok2 or a[c1 + 1] == 45 or a[c2 + 1] == 45:
        return False
    h0 = hs
    for j in range(c1 - 1, hs - 1, -1):
        if a[j] == 58:  # a launcher tag glued before the host ends at a ':'
            h0 = j + 1
            break
    out[i, col + 0] = pid
    out[i, col + 1] = tid
    out[i, col + 2] = h0
    out[i, col + 3] = c1
    out[i, col + 4] = NO_TS
    out[i, col + 5] = -1
    out[i, col + 6] = -1
    # ``[dev]``: the thread's current CUDA device (-1 when not a plain number)
    dev, ok3 = _decimal(a, s1 + 2, info - 1, 6)
    out[i, col + 7] = dev if ok3 and a[info - 1] == 93 else -1
    if s2 >= 0:
        ts = _timestamp(a, ls, s2)
        out[i, col + 4] = ts
        if ts == NO_TS:
            out[i, col + 5] = ls
            out[i, col + 6] = s2
    return True


@njit(_B(_A, _I, _I, _I, _OUT, _U64, _I, _SP), cache=True, nogil=True)
def _coll(a, ls, le, m, out, u64, i, sp):
    """Read the COLL body whose ``": opCount "`` is at ``m`` into row ``i``; False when it is not standard.

    ``sp`` is scratch space: the start of token k of the body goes to ``sp[k]``, its end to
    ``sp[_MAX_TOK + k]``.
    """
    tok_s = sp[:_MAX_TOK]
    tok_e = sp[_MAX_TOK:]
    body = m + 10
    tok_s[0] = body
    nsp = 0
    for j in range(body, le):
        if a[j] == 32:
            if nsp == _MAX_TOK - 1:
                return False
            tok_e[nsp] = j
            nsp += 1
            tok_s[nsp] = j + 1
    tok_e[nsp] = le
    ntok = nsp + 1
    if ntok == 17 or ntok == 18:
        shift, rccl = 0, False
    elif ntok == 19 or ntok == 20:
        shift, rccl = 2, False
    elif ntok == 22:
        shift, rccl = 0, True
    elif ntok == 24:
        shift, rccl = 2, True
    else:
        return False

    if not (_word(a, tok_s[1], tok_e[1], KW_MAT, KW_LEN, 0) and _word(a, tok_s[3], tok_e[3], KW_MAT, KW_LEN, 1)):
        return False
    if shift and not _word(a, tok_s[5], tok_e[5], KW_MAT, KW_LEN, 2):
        return False
    for k, w in ((5, 3), (7, 4), (9, 5), (11, 6), (13, 7), (16, 8)):
        if not _word(a, tok_s[k + shift], tok_e[k + shift], KW_MAT, KW_LEN, w):
            return False
    if rccl and not (_word(a, tok_s[18 + shift], tok_e[18 + shift], KW_MAT, KW_LEN, 9)
                     and _word(a, tok_s[20 + shift], tok_e[20 + shift], KW_MAT, KW_LEN, 10)):
        return False
    count, ok1 = _decimal(a, tok_s[6 + shift], tok_e[6 + shift], 18)
    dt, ok2 = _decimal(a, tok_s[8 + shift], tok_e[8 + shift], 4)
    root, ok3 = _decimal(a, tok_s[12 + shift], tok_e[12 + shift], 9)
    s, e = tok_s[15 + shift], tok_e[15 + shift]
    if not (ok1 and ok2 and ok3 and e - s > 9 and a[s] == 91 and a[s + 7] == 61 and a[e - 1] == 93):
        return False
    if not (a[s + 1] == 110 and a[s + 2] == 114 and a[s + 3] == 97 and a[s + 4] == 110 and a[s + 5] == 107
            and a[s + 6] == 115):  # "nranks"
        return False
    nranks, ok4 = _decimal(a, s + 8, e - 1, 9)
    opc, ok5 = _hex(a, tok_s[0], tok_e[0])
    s, e = tok_s[14 + shift], tok_e[14 + shift]
    if not (ok4 and ok5 and e - s > 2 and a[s] == 48 and a[s + 1] == 120):
        return False
    comm, ok6 = _hex(a, s + 2, e)
    grank = -1
    ok7 = True
    if rccl:
        grank, ok7 = _decimal(a, tok_s[21 + shift], tok_e[21 + shift], 9)
    if not (ok6 and ok7):
        return False
    sp_op = _prev_space(a, m, ls)
    op_start = sp_op + 1 if sp_op >= 0 else ls
    op = _op_code(a, op_start, m)
    if op < 0 or not _prefix(a, ls, op_start, out, i, C_PID):
        return False
    out[i, C_OP] = op
    out[i, C_COUNT] = count
    out[i, C_DT] = dt
    out[i, C_ROOT] = root
    out[i, C_NRANKS] = nranks
    out[i, C_GRANK] = grank
    u64[i, 0] = opc
    u64[i, 1] = comm
    return True


@njit(_B(nt.uint8), cache=True, nogil=True)
def _is_word_byte(c):
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@njit(_B(_A, _I, _I, _I, _OUT, _I), cache=True, nogil=True)
def _tuning(a, ls, le, mt, out, i):
    """Read the TUNING line whose ``" Bytes -> Algo "`` is at ``mt`` into row ``i``; False when not standard."""
    sp_prev = _prev_space(a, mt, ls)
    nb_start = sp_prev + 1 if sp_prev >= 0 else ls
    nbytes, ok = _decimal(a, nb_start, mt, 18)
    if not ok:
        return False
    k2 = _prev_space(a, sp_prev, ls) if sp_prev >= 0 else -1
    op_start = k2 + 1 if k2 >= 0 else ls
    named = nb_start - 2 >= ls and a[nb_start - 2] == 58
    op = -1
    if named:
        op = _op_code(a, op_start, nb_start - 2)
        if op < 0:
            return False
    if not _prefix(a, ls, op_start if named else nb_start, out, i, T_PID):
        return False
    a0 = mt + 15
    s0 = -1
    s1 = -1
    s2 = -1
    for j in range(a0, le):
        if a[j] == 32:
            if s0 < 0:
                s0 = j
            elif s1 < 0:
                s1 = j
            else:
                s2 = j
                break
    if s1 < 0 or not _is(a, s0 + 1, _PROTO) or s1 - s0 - 1 != 5:
        return False
    pe = s2 if s2 >= 0 else le
    if s0 <= a0 or pe <= s1 + 1:
        return False
    for j in range(a0, s0):
        if not _is_word_byte(a[j]):
            return False
    for j in range(s1 + 1, pe):
        if not _is_word_byte(a[j]):
            return False
    out[i, T_OP] = op
    out[i, T_NBYTES] = nbytes
    out[i, T_AS] = a0
    out[i, T_AE] = s0
    out[i, T_PS] = s1 + 1
    out[i, T_PE] = pe
    return True


@njit(cache=True, nogil=True)
def scan_chunk(a):
    """Classify every line of a chunk of complete lines and read the standard COLL and TUNING lines.

    Parameters
    ----------
    a : numpy.ndarray of uint8
        The chunk's bytes.

    Returns
    -------
    (coll, coll_u64, tuning, others, n_lines)
        ``coll``: int64 rows (``C_*`` columns) of the lines holding ``": opCount "``, ``C_OK`` 0 where the
        per-line parser must read the line (not one standard body); ``coll_u64``: opCount and comm pointer
        of each row as uint64; ``tuning``: int64 rows (``T_*`` columns) of the lines holding
        ``" Bytes -> Algo "``; ``others``: (line, start, end) of the lines the rare-line parser must see
        (Init, ring, version candidates, TUNING lines not read here); ``n_lines``: lines in the chunk.
    """
    n = len(a)
    n_lines = 0
    for j in range(n):
        if a[j] == 10:
            n_lines += 1
    if n and a[n - 1] != 10:
        n_lines += 1
    # One flat pass over the bytes with a lookup table (tight, branch-light), noting per line where the
    # marks are; then the per-line work touches only the lines that hold one.
    line_end = np.empty(n_lines, dtype=np.int64)
    coll_at = np.full(n_lines, -1, dtype=np.int64)
    tun_at = np.full(n_lines, -1, dtype=np.int64)
    # 1: second COLL mark, 2: second TUNING mark, 4: rare-line literal, 16: one " NCCL INFO ", 8: a second one
    flags = np.zeros(n_lines, dtype=np.uint8)
    line = 0
    for j in range(n):
        k = _TRIGGER[a[j]]
        if k == 0:
            continue
        if k == 1:
            line_end[line] = j
            line += 1
        elif k == 2:
            if _is(a, j, _COLL_MARK):
                if coll_at[line] < 0:
                    coll_at[line] = j
                else:
                    flags[line] |= 1
        elif k == 3:
            if _is(a, j - 1, _TUNING_MARK):
                if tun_at[line] < 0:
                    tun_at[line] = j - 1
                else:
                    flags[line] |= 2
        elif k == 4:
            if _is(a, j - 2, _ANKS):
                flags[line] |= 4
        elif k == 5:
            if _is(a, j, _CHANNEL):
                flags[line] |= 4
        elif k == 6:
            if _is(a, j - 5, _VERSION):
                flags[line] |= 4
        elif k == 7:
            if _is(a, j - 8, _INFO):
                flags[line] |= 8 if flags[line] & 16 else 16
    if line < n_lines:
        line_end[line] = n
    nc = nt = no = 0
    for line in range(n_lines):
        if coll_at[line] >= 0:
            nc += 1
        if tun_at[line] >= 0:
            nt += 1
        if coll_at[line] < 0 and (tun_at[line] >= 0 or flags[line] & 12):
            no += 1
    coll = np.empty((nc, C_COLS), dtype=np.int64)
    u64 = np.zeros((nc, 2), dtype=np.uint64)
    tuning = np.empty((nt, T_COLS), dtype=np.int64)
    others = np.empty((no, 3), dtype=np.int64)
    scratch = np.empty(2 * _MAX_TOK, dtype=np.int64)
    nc = nt = no = 0
    for line in range(n_lines):
        cm = coll_at[line]
        tm = tun_at[line]
        if cm < 0 and tm < 0 and not flags[line] & 12:
            continue
        ls = line_end[line - 1] + 1 if line else 0
        le = line_end[line]
        if le > ls and a[le - 1] == 13:
            le -= 1
        tuning_ok = False
        if tm >= 0:
            tuning[nt, T_LINE] = line
            tuning[nt, T_LS] = ls
            tuning[nt, T_LE] = le
            tuning_ok = (not flags[line] & 2) and _tuning(a, ls, le, tm, tuning, nt)
            tuning[nt, T_OK] = tuning_ok
            nt += 1
        if cm >= 0:
            coll[nc, C_LINE] = line
            coll[nc, C_LS] = ls
            coll[nc, C_LE] = le
            coll[nc, C_OK] = (not flags[line] & 9) and _coll(a, ls, le, cm, coll, u64, nc, scratch)
            nc += 1
        elif not tuning_ok or flags[line] & 8:
            others[no, 0] = line
            others[no, 1] = ls
            others[no, 2] = le
            no += 1
    return coll[:nc], u64[:nc], tuning[:nt], others[:no], n_lines


@njit(cache=True, nogil=True)
def span_hashes(a, start, end):
    """FNV-1a 64-bit hash of each byte span [start, end) of ``a`` (empty spans hash alike)."""
    out = np.empty(len(start), dtype=np.uint64)
    for i in range(len(start)):
        h = np.uint64(14695981039346656037)
        for j in range(start[i], end[i]):
            h = (h ^ np.uint64(a[j])) * np.uint64(1099511628211)
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def spans_equal(a, s1, e1, s2, e2):
    """True when every span [s1, e1) holds the same bytes as the span [s2, e2) of the same row."""
    for i in range(len(s1)):
        if e1[i] - s1[i] != e2[i] - s2[i]:
            return False
        for j in range(e1[i] - s1[i]):
            if a[s1[i] + j] != a[s2[i] + j]:
                return False
    return True


def distinct_spans(a: np.ndarray, buf: bytes, start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, list[bytes]]:
    """Codes and distinct byte strings of the spans [start, end) of a chunk (one Python object per value),
    hashed by this module's :func:`span_hashes` (:func:`traces.formats.nccl.kernel_cols.distinct_spans`).

    Examples
    --------
    >>> buf = b"ab cd ab"
    >>> codes, uniq = distinct_spans(np.frombuffer(buf, np.uint8), buf, np.array([0, 3, 6]), np.array([2, 5, 8]))
    >>> codes.tolist(), uniq
    ([0, 1, 0], [b'ab', b'cd'])
    """
    return spans_of(sys.modules[__name__], a, buf, start, end)


__all__ = ["C_COLS", "C_COUNT", "C_DEV", "C_DT", "C_GRANK", "C_HE", "C_HS", "C_LE", "C_LINE", "C_LS",
    "C_NRANKS", "C_OE", "C_OK", "C_OP", "C_OS", "C_PID", "C_ROOT", "C_TID", "C_TS", "KW_LEN", "KW_MAT",
    "NO_TS", "OP_LEN", "OP_LIST", "OP_MAT", "OP_NAMES", "T_AE", "T_AS", "T_COLS", "T_DEV", "T_HE", "T_HS",
    "T_LE", "T_LINE", "T_LS", "T_NBYTES", "T_OE", "T_OK", "T_OP", "T_OS", "T_PE", "T_PID", "T_PS", "T_TID",
    "T_TS", "distinct_spans", "scan_chunk", "span_hashes", "spans_equal"]
