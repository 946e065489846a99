"""The ranking rule of ``simrun compare`` and ``simrun sweep``: who wins a figure, by how much, or a tie.

One rule for every figure where lower is better: the candidates whose value is within the simulator's
stated error of the best value share the win. The stated error (``STATED_ERROR_REL``, 1 %) is the
tolerance the tests hold the simulator to against closed forms (ring collectives within 1 % of the alpha-beta
time; the CLI's completion batching adds at most 0.2 % to a makespan, docs/simulator.md): two fabrics whose
figures differ by less than that are not told apart.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["QUESTIONS", "STATED_ERROR_REL", "Ranking", "rank", "sentence", "verdicts"]

#: Relative difference below which two figures are a tie.
STATED_ERROR_REL = 0.01
#: Questions of the verdict: summary key, what it is, unit formatter. Lower is better for all.
QUESTIONS = (
    ("exposed_comm_s", "exposed communication", lambda v: f"{v * 1e3:.3f} ms"),
    ("makespan_s", "makespan", lambda v: f"{v * 1e3:.3f} ms"),
    ("slowdown_p99", "p99 collective slowdown", lambda v: f"x{v:.3f}"),
    ("incast_events", "incast events", lambda v: f"{int(v):,}"),
)


@dataclass(frozen=True)
class Ranking:
    """Outcome of :func:`rank`.

    Attributes
    ----------
    order : tuple of str
        Candidates, best first (ties keep the given order).
    winners : tuple of str
        The best candidate and every one within the stated error of it.
    margin_rel : float
        How much lower the best value is than the best candidate outside the winners, relative to that
        candidate's value (NaN when every candidate ties).
    tie : bool
        More than one winner.
    """

    order: tuple[str, ...]
    values: tuple[float, ...]
    winners: tuple[str, ...]
    margin_rel: float
    tie: bool


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) or a == b


def rank(names: Sequence[str], values: Sequence[float], rel: float = STATED_ERROR_REL) -> Ranking:
    """Rank candidates on a figure where lower is better; NaN / None values rank last and never win.

    Examples
    --------
    >>> r = rank(["a", "b", "c"], [2.0, 1.0, 1.005])
    >>> r.winners, r.tie, round(r.margin_rel, 3)
    (('b', 'c'), True, 0.5)
    >>> rank(["a", "b"], [3.0, 2.0]).winners
    ('b',)
    """
    vals = [float(v) if v is not None and math.isfinite(float(v)) else math.nan for v in values]
    idx = sorted(range(len(names)), key=lambda i: (math.isnan(vals[i]), vals[i] if not math.isnan(vals[i]) else 0, i))
    order = tuple(names[i] for i in idx)
    ordered = tuple(vals[i] for i in idx)
    if not idx or math.isnan(ordered[0]):
        return Ranking(order, ordered, (), math.nan, False)
    best = ordered[0]
    winners = tuple(n for n, v in zip(order, ordered, strict=True) if not math.isnan(v) and _close(v, best, rel))
    rest = [v for n, v in zip(order, ordered, strict=True) if n not in winners and not math.isnan(v)]
    margin = (rest[0] - best) / abs(rest[0]) if rest and rest[0] != 0 else math.nan
    return Ranking(order, ordered, winners, margin, len(winners) > 1)


def sentence(what: str, ranking: Ranking, fmt=lambda v: f"{v:.4g}", rel: float = STATED_ERROR_REL) -> str:
    """One sentence: who wins ``what`` and by how much, or which candidates tie.

    Examples
    --------
    >>> sentence("makespan", rank(["a", "b"], [3.0, 2.0]))
    'makespan: b wins (2), 33.3 % lower than a (3).'
    >>> print(sentence("makespan", rank(["a", "b"], [2.0, 2.001])))
    makespan: a and b tie (2 vs 2.001; within 1 %, the simulator's stated error).
    """
    if not ranking.winners:
        return f"{what}: no figure to compare."
    vals = dict(zip(ranking.order, ranking.values, strict=True))
    others = [n for n in ranking.order if n not in ranking.winners and not math.isnan(vals[n])]
    if not ranking.tie and not others:
        return f"{what}: {ranking.winners[0]} ({fmt(vals[ranking.winners[0]])}); nothing else to compare with."
    if ranking.tie and len(ranking.winners) == len([v for v in ranking.values if not math.isnan(v)]):
        names = _join(ranking.winners)
        shown = " vs ".join(fmt(vals[n]) for n in ranking.winners)
        return f"{what}: {names} tie ({shown}; within {rel * 100:.0f} %, the simulator's stated error)."
    lead = _join(ranking.winners)
    verb = "tie for the win" if ranking.tie else "wins"
    nxt = others[0]
    best = vals[ranking.winners[0]]
    margin = f"{ranking.margin_rel * 100:.1f} %"
    return f"{what}: {lead} {verb} ({fmt(best)}), {margin} lower than {nxt} ({fmt(vals[nxt])})."


def _join(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdicts(rows: Sequence[dict], label: str = "topo", rel: float = STATED_ERROR_REL) -> list[tuple[str, Ranking, str]]:
    """The verdict of every :data:`QUESTIONS` figure present in ``rows`` (one dict per candidate).

    Returns
    -------
    list of (key, Ranking, sentence)
    """
    names = [str(r[label]) for r in rows]
    out = []
    for key, what, fmt in QUESTIONS:
        if not any(r.get(key) is not None for r in rows):
            continue
        ranking = rank(names, [r.get(key) for r in rows], rel)
        out.append((key, ranking, sentence(what, ranking, fmt, rel)))
    return out
