"""Compiled (numba) twin of :func:`sim.analytical.tier.schedule`'s rank-program loop.

The same loop over the same arrays, with Python's ``max`` written out as the comparison it makes
(``max(a, b)`` is ``b if b > a else a``), so start and end times are the Python loop's, bit for bit
(``tests/sim/analytical/test_schedule.py``). :func:`sim.analytical.tier.schedule` picks it where numba
is loaded already or the programs are long enough to pay for loading it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["run_programs"]


@njit(cache=True, nogil=True)
def run_programs(mode, sptr, sidx, need, optr, op_steps, prog_ptr, step_prog, t0, gap, delay, dur, remaining):
    """Start and end of every op and each program's next step (``mode``: 0 trace, 1 gaps, 2 asap).

    ``remaining`` (ops each step waits for) is consumed. A program whose next step is before its end
    never completed (deadlock).
    """
    n_ops = len(need)
    n_prog = len(prog_ptr) - 1
    n_steps = len(t0)
    arrived = np.zeros(n_ops, np.int64)
    latest = np.zeros(n_ops)
    start = np.full(n_ops, np.nan)
    end = np.full(n_ops, np.nan)
    step_end = np.zeros(n_steps)
    cur = prog_ptr[:-1].copy()
    prev_done = np.zeros(n_prog)
    has_prev = np.zeros(n_prog, np.bool_)
    stack = np.empty(n_prog + 1, np.int64)
    ready = np.empty(n_steps + 1, np.int64)
    top = 0
    for p in range(n_prog):
        if prog_ptr[p] < prog_ptr[p + 1]:
            stack[top] = p
            top += 1
    while top > 0:
        top -= 1
        p = stack[top]
        s = cur[p]
        if mode == 0 or mode == 1:
            if not has_prev[p]:
                t = t0[s]
            elif mode == 1:
                t = prev_done[p] + gap[s]
            else:
                x = prev_done[p] + gap[s]
                t = x if x > t0[s] else t0[s]
        else:
            t = prev_done[p] if has_prev[p] else 0.0
        t += delay[p]
        n_ready = 0
        if sptr[s] == sptr[s + 1]:
            remaining[s] = -1
            ready[0] = s
            n_ready = 1
            step_end[s] = t
        for k in range(sptr[s], sptr[s + 1]):
            op = sidx[k]
            arrived[op] += 1
            if t > latest[op]:
                latest[op] = t
            if arrived[op] == need[op]:
                start[op] = latest[op]
                end[op] = latest[op] + dur[op]
                for j in range(optr[op], optr[op + 1]):
                    st = op_steps[j]
                    remaining[st] -= 1
                    if end[op] > step_end[st]:
                        step_end[st] = end[op]
                    if remaining[st] == 0:
                        ready[n_ready] = st
                        n_ready += 1
        for i in range(n_ready):
            st = ready[i]
            q = step_prog[st]
            prev_done[q] = step_end[st]
            has_prev[q] = True
            cur[q] += 1
            if cur[q] < prog_ptr[q + 1]:
                stack[top] = q
                top += 1
    return start, end, cur
