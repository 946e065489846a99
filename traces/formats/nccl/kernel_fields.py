"""The compiled (numba) readers of one NCCL log line's fields: numbers, hex pointers, keywords, the outer
timestamp, the ``host:pid:tid [dev] NCCL INFO`` prefix, and the standard COLL and TUNING bodies.

:func:`traces.formats.nccl.kernel_numba.scan_chunk` finds the lines and calls :func:`read_coll` and
:func:`read_tuning`; each returns False where the line is not exactly one standard layout (the caller then
hands it to the forgiving per-line parser). Explicit signatures: one machine-code version per helper
(numba would otherwise compile one per literal argument it sees, which tripled the first-run compile time).

numba caches each function's machine code keyed on its own file only: an edit here does not invalidate the
cached ``scan_chunk`` of :mod:`traces.formats.nccl.kernel_numba`, into which these are compiled (numba's
documented limit). After editing this file, clear the ``__pycache__`` beside it (the ahead-of-time build
of :mod:`traces.formats.nccl.kernel_aot` hashes this file and never goes stale).

Examples
--------
>>> a = np.frombuffer(b"x 0x1f 42", dtype=np.uint8)
>>> hex_at(a, 4, 6), decimal_at(a, 7, 9, 18), int(prev_space(a, 7, 0))
((31, True), (42, True), 6)
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba import types as nt

from traces.formats.nccl.kernel_cols import (
    C_COUNT,
    C_DT,
    C_GRANK,
    C_NRANKS,
    C_OP,
    C_PID,
    C_ROOT,
    NO_TS,
    OP_LIST,
    T_AE,
    T_AS,
    T_NBYTES,
    T_OP,
    T_PE,
    T_PID,
    T_PS,
)

#: numba types of the signatures (the chunk's bytes and the literal tables are read-only).
CHUNK = nt.Array(nt.uint8, 1, "C", readonly=True)
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

_INFO = np.frombuffer(b" NCCL INFO ", dtype=np.uint8)
_PROTO = np.frombuffer(b"proto", dtype=np.uint8)
#: COLL keywords, as a (words x width) byte matrix; :func:`read_coll` knows their token positions per layout.
_KW = [b"sendbuff", b"recvbuff", b"acc", b"count", b"datatype", b"op", b"root", b"comm", b"stream", b"task",
       b"globalrank"]
_KW_W = max(len(w) for w in _KW)
KW_MAT = np.zeros((len(_KW), _KW_W), dtype=np.uint8)
KW_LEN = np.array([len(w) for w in _KW], dtype=np.int64)
for _k, _w in enumerate(_KW):
    KW_MAT[_k, : len(_w)] = np.frombuffer(_w, dtype=np.uint8)
#: Scratch per COLL line: more tokens than the longest layout (24) has.
MAX_TOK = 25


@njit(_B(CHUNK, _I, CHUNK), cache=True, nogil=True)
def is_at(a, pos, lit):
    """True when ``lit`` is at ``a[pos:]``."""
    if pos < 0 or pos + len(lit) > len(a):
        return False
    for j in range(len(lit)):
        if a[pos + j] != lit[j]:
            return False
    return True


@njit(_B(CHUNK, _I, _I, _MAT, _LEN, _I), cache=True, nogil=True)
def word_at(a, s, e, mat, length, k):
    """True when [s, e) holds keyword ``k`` of ``mat`` exactly."""
    if e - s != length[k]:
        return False
    for j in range(e - s):
        if a[s + j] != mat[k, j]:
            return False
    return True


@njit(nt.Tuple((_I, _B))(CHUNK, _I, _I, _I), cache=True, nogil=True)
def decimal_at(a, s, e, width):
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


@njit(nt.Tuple((nt.uint64, _B))(CHUNK, _I, _I), cache=True, nogil=True)
def hex_at(a, s, e):
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


@njit(_I(CHUNK, _I, _I), cache=True, nogil=True)
def op_code(a, s, e):
    """Index in OP_LIST of the name exactly in [s, e), else -1."""
    for k in range(OP_MAT.shape[0]):
        if word_at(a, s, e, OP_MAT, OP_LEN, k):
            return k
    return -1


@njit(_I(CHUNK, _I, _I), cache=True, nogil=True)
def prev_space(a, pos, ls):
    """Position of the last space in [ls, pos), else -1."""
    for j in range(pos - 1, ls - 1, -1):
        if a[j] == 32:
            return j
    return -1


@njit(_I(CHUNK, _I, _I), cache=True, nogil=True)
def digits_at(a, s, k):
    """The k checked decimal digits at ``a[s:]`` as an integer."""
    v = 0
    for j in range(s, s + k):
        v = v * 10 + (np.int64(a[j]) - 48)
    return v


@njit(_I(CHUNK, _I, _I), cache=True, nogil=True)
def timestamp_at(a, s, e):
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
    y = digits_at(a, s, 4)
    m = digits_at(a, s + 5, 2)
    day = digits_at(a, s + 8, 2)
    secs = digits_at(a, s + 11, 2) * 3600 + digits_at(a, s + 14, 2) * 60 + digits_at(a, s + 17, 2)
    # days from civil (H. Hinnant), as the numpy path computes it
    if m <= 2:
        y -= 1
    era = y // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days = era * 146097 + doe - 719468
    return days * 86_400_000_000 + secs * 1_000_000 + frac


@njit(_B(CHUNK, _I, _I, _OUT, _I, _I), cache=True, nogil=True)
def read_prefix(a, ls, body, out, i, col):
    """Read ``[outer ]host:pid:tid [dev] NCCL INFO `` ending at ``body`` into row ``i`` of ``out`` (pid, tid,
    host start, host end, ts, outer start, outer end, dev); False when the line has no such prefix.

    ``ts`` is NO_TS with the outer span set when the outer text is not a timestamp the fixed layout reads
    (the caller then parses that text once per distinct value).
    """
    info = body - 11
    if info <= ls or not is_at(a, info, _INFO):
        return False
    s1 = prev_space(a, info, ls)
    if s1 < 0 or a[s1 + 1] != 91:
        return False
    s2 = prev_space(a, s1, ls)
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
    pid, ok1 = decimal_at(a, c1 + 1, c2, 18)
    tid, ok2 = decimal_at(a, c2 + 1, s1, 18)
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
    dev, ok3 = decimal_at(a, s1 + 2, info - 1, 6)
    out[i, col + 7] = dev if ok3 and a[info - 1] == 93 else -1
    if s2 >= 0:
        ts = timestamp_at(a, ls, s2)
        out[i, col + 4] = ts
        if ts == NO_TS:
            out[i, col + 5] = ls
            out[i, col + 6] = s2
    return True


@njit(_B(CHUNK, _I, _I, _I, _OUT, _U64, _I, _SP), cache=True, nogil=True)
def read_coll(a, ls, le, m, out, u64, i, sp):
    """Read the COLL body whose ``": opCount "`` is at ``m`` into row ``i``; False when it is not standard.

    ``sp`` is scratch space: the start of token k of the body goes to ``sp[k]``, its end to
    ``sp[MAX_TOK + k]``.
    """
    tok_s = sp[:MAX_TOK]
    tok_e = sp[MAX_TOK:]
    body = m + 10
    tok_s[0] = body
    nsp = 0
    for j in range(body, le):
        if a[j] == 32:
            if nsp == MAX_TOK - 1:
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

    if not (word_at(a, tok_s[1], tok_e[1], KW_MAT, KW_LEN, 0) and word_at(a, tok_s[3], tok_e[3], KW_MAT, KW_LEN, 1)):
        return False
    if shift and not word_at(a, tok_s[5], tok_e[5], KW_MAT, KW_LEN, 2):
        return False
    for k, w in ((5, 3), (7, 4), (9, 5), (11, 6), (13, 7), (16, 8)):
        if not word_at(a, tok_s[k + shift], tok_e[k + shift], KW_MAT, KW_LEN, w):
            return False
    if rccl and not (word_at(a, tok_s[18 + shift], tok_e[18 + shift], KW_MAT, KW_LEN, 9)
                     and word_at(a, tok_s[20 + shift], tok_e[20 + shift], KW_MAT, KW_LEN, 10)):
        return False
    count, ok1 = decimal_at(a, tok_s[6 + shift], tok_e[6 + shift], 18)
    dt, ok2 = decimal_at(a, tok_s[8 + shift], tok_e[8 + shift], 4)
    root, ok3 = decimal_at(a, tok_s[12 + shift], tok_e[12 + shift], 9)
    s, e = tok_s[15 + shift], tok_e[15 + shift]
    if not (ok1 and ok2 and ok3 and e - s > 9 and a[s] == 91 and a[s + 7] == 61 and a[e - 1] == 93):
        return False
    if not (a[s + 1] == 110 and a[s + 2] == 114 and a[s + 3] == 97 and a[s + 4] == 110 and a[s + 5] == 107
            and a[s + 6] == 115):  # "nranks"
        return False
    nranks, ok4 = decimal_at(a, s + 8, e - 1, 9)
    opc, ok5 = hex_at(a, tok_s[0], tok_e[0])
    s, e = tok_s[14 + shift], tok_e[14 + shift]
    if not (ok4 and ok5 and e - s > 2 and a[s] == 48 and a[s + 1] == 120):
        return False
    comm, ok6 = hex_at(a, s + 2, e)
    grank = -1
    ok7 = True
    if rccl:
        grank, ok7 = decimal_at(a, tok_s[21 + shift], tok_e[21 + shift], 9)
    if not (ok6 and ok7):
        return False
    sp_op = prev_space(a, m, ls)
    op_start = sp_op + 1 if sp_op >= 0 else ls
    op = op_code(a, op_start, m)
    if op < 0 or not read_prefix(a, ls, op_start, out, i, C_PID):
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
def is_word_byte(c):
    """True for a byte of ``[0-9A-Za-z_]``."""
    return (48 <= c <= 57) or (65 <= c <= 90) or (97 <= c <= 122) or c == 95


@njit(_B(CHUNK, _I, _I, _I, _OUT, _I), cache=True, nogil=True)
def read_tuning(a, ls, le, mt, out, i):
    """Read the TUNING line whose ``" Bytes -> Algo "`` is at ``mt`` into row ``i``; False when not standard."""
    sp_prev = prev_space(a, mt, ls)
    nb_start = sp_prev + 1 if sp_prev >= 0 else ls
    nbytes, ok = decimal_at(a, nb_start, mt, 18)
    if not ok:
        return False
    k2 = prev_space(a, sp_prev, ls) if sp_prev >= 0 else -1
    op_start = k2 + 1 if k2 >= 0 else ls
    named = nb_start - 2 >= ls and a[nb_start - 2] == 58
    op = -1
    if named:
        op = op_code(a, op_start, nb_start - 2)
        if op < 0:
            return False
    if not read_prefix(a, ls, op_start if named else nb_start, out, i, T_PID):
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
    if s1 < 0 or not is_at(a, s0 + 1, _PROTO) or s1 - s0 - 1 != 5:
        return False
    pe = s2 if s2 >= 0 else le
    if s0 <= a0 or pe <= s1 + 1:
        return False
    for j in range(a0, s0):
        if not is_word_byte(a[j]):
            return False
    for j in range(s1 + 1, pe):
        if not is_word_byte(a[j]):
            return False
    out[i, T_OP] = op
    out[i, T_NBYTES] = nbytes
    out[i, T_AS] = a0
    out[i, T_AE] = s0
    out[i, T_PS] = s1 + 1
    out[i, T_PE] = pe
    return True


__all__ = ["CHUNK", "KW_LEN", "KW_MAT", "MAX_TOK", "OP_LEN", "OP_MAT", "decimal_at", "digits_at", "hex_at", "is_at",
           "is_word_byte", "op_code", "prev_space", "read_coll", "read_prefix", "read_tuning", "timestamp_at", "word_at"]
