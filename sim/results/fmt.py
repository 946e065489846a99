"""Human formatting of figures for pages and the terminal: times, sizes, shares, and small HTML helpers."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

__all__ = ["esc", "gb", "ms", "pct", "table_html", "us", "x"]


def _bad(v) -> bool:
    return v is None or (isinstance(v, float) and not math.isfinite(v))


def ms(v_s) -> str:
    """Seconds as milliseconds.

    Examples
    --------
    >>> ms(0.0123456)
    '12.346 ms'
    """
    return "n/a" if _bad(v_s) else f"{float(v_s) * 1e3 + 0.0:,.3f} ms".replace("-0.000", "0.000")


def us(v_s) -> str:
    """Seconds as microseconds.

    Examples
    --------
    >>> us(2.5e-6)
    '2.5 µs'
    """
    return "n/a" if _bad(v_s) else f"{float(v_s) * 1e6:,.1f} µs".replace("-0.0 ", "0.0 ")


def gb(v_bytes) -> str:
    """Bytes as GB (10^9 B), MB below 1 GB.

    Examples
    --------
    >>> gb(4.74614e10), gb(2.5e6)
    ('47.46 GB', '2.50 MB')
    """
    if _bad(v_bytes):
        return "n/a"
    v = float(v_bytes)
    return f"{v / 1e9:,.2f} GB" if abs(v) >= 1e9 else f"{v / 1e6:,.2f} MB"


def pct(v_frac, digits: int = 1) -> str:
    """A fraction as a percentage.

    Examples
    --------
    >>> pct(0.1234)
    '12.3 %'
    """
    return "n/a" if _bad(v_frac) else f"{float(v_frac) * 100:,.{digits}f} %"


def x(v) -> str:
    """A ratio, ``x1.234``."""
    return "n/a" if _bad(v) else f"x{float(v):.3f}"


def esc(v) -> str:
    """HTML-escaped text."""
    return html.escape(str(v))


def table_html(header: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A plain HTML table; cells are escaped, the first column is a row heading."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join((f"<th>{esc(c)}</th>" if i == 0 else f"<td>{esc(c)}</td>")
                                    for i, c in enumerate(r)) + "</tr>" for r in rows)
    attr = f" class='{cls}'" if cls else ""
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
