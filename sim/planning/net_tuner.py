"""Net plugins' tuners: the choice a plugin's tuner makes before NCCL's own (``net_tuner`` fabric attribute).

``aws-ofi``: aws-ofi-nccl's *region* tuner on P5/P5e (``src/tuner/nccl_ofi_regions.cpp``,
``region_init_internal_p5_p5e``, master of 2026-08). It places the collective at the point
``(log2 bytes, log2 ranks)`` and takes the (algorithm, protocol) of the first region polygon that contains
it (a point on an edge counts), provided NCCL has that combination enabled; outside every region, and on
two servers or fewer ("the regions are not well defined", ``region_get_coll_info_internal_v3``), NCCL's
own tuner decides. Only the AllReduce regions of 8 GPUs per server are carried here (the P5 layout); other
ops and layouts fall back to NCCL's tuner. The vertices are the plugin's, in bytes and ranks; the open
sides of its polygons are extended to the plugin's limits (100 GiB, 2^20 ranks) along the line through
their last two vertices, as its ``extend_region`` does.
"""

from __future__ import annotations

import math

__all__ = ["NET_TUNERS", "TUNER_MAX_RANKS", "TUNER_MAX_SIZE", "aws_ofi_region_choice", "net_tuner_choice"]

#: Net plugin tuners collsim models (the ``net_tuner`` fabric attribute).
NET_TUNERS: tuple[str, ...] = ("aws-ofi",)
#: The region tuner's limits (``nccl_ofi_tuner_region.h``): 100 GiB and 2^20 ranks.
TUNER_MAX_SIZE = 100.0 * 1024 ** 3
TUNER_MAX_RANKS = 1024.0 * 1024

_Point = tuple[float, float]


def _log2(p: _Point) -> _Point:
    # the plugin maps 0 to a small positive number before the log
    return (math.log2(p[0] if p[0] > 0 else 1e-6), math.log2(p[1] if p[1] > 0 else 1e-6))


def _extend(a: _Point, b: _Point) -> _Point:
    """The point where the line through ``a`` and ``b`` (log2 space) leaves the box at the plugin's limits."""
    (ax, ay), (bx, by), (zx, zy) = _log2(a), _log2(b), _log2((TUNER_MAX_SIZE, TUNER_MAX_RANKS))
    if ax == bx:
        return (a[0], 2.0 ** zy)
    if ay == by:
        return (2.0 ** zx, a[1])
    m = (ay - by) / (ax - bx)
    c = by - m * bx
    y = m * zx + c
    return (2.0 ** zx, 2.0 ** y) if y < zy else (2.0 ** ((zy - c) / m), 2.0 ** zy)


def _p5_allreduce_8ppn() -> list[tuple[str, str, list[_Point]]]:
    tree_ll128 = _extend((402653184, 2048), (402653184, 4096))
    nvlstree_1 = _extend((8053063680, 160), (9663676416, 192))
    nvlstree_2 = _extend((402653184, 2048), (402653184, 4096))
    ring_simple = _extend((8053063680, 160), (9663676416, 192))
    return [
        ("tree", "LL128", [(0, 16), (31457280, 16), (37748736, 32), (117440512, 64), (301989888, 128),
                           (301989888, 256), (335544320, 512), (536870912, 1024), (402653184, 2048),
                           (402653184, 4096), tree_ll128, (0, tree_ll128[1])]),
        ("nvls_tree", "Simple", [(31457281, 16), (TUNER_MAX_SIZE, 16), (31457281, 16)]),
        ("ring", "LL128", [(31457280, 17), (1073741824, 17), (2147483648, 64), (2147483648, 128),
                           (1342177280, 160), (2147483648, 256), (1074790400, 256), (444596224, 160),
                           (301989888, 128), (117440512, 64), (37748736, 32)]),
        ("nvls_tree", "Simple", [(2147483648, 128), (6442450944, 128), (8053063680, 160), (9663676416, 192),
                                 nvlstree_1, nvlstree_2, (402653184, 4096), (402653184, 2048),
                                 (536870912, 1024), (335544320, 512), (301989888, 256), (310378496, 160),
                                 (444596224, 160), (1074790400, 256), (2684354560, 256), (2147483648, 224),
                                 (1342177280, 160)]),
        ("ring", "Simple", [(1073741824, 17), (ring_simple[0], 17), ring_simple, (9663676416, 192),
                            (8053063680, 160), (2684354560, 64), (1610612736, 32)]),
    ]


_P5_AR_8PPN = [(a, p, [_log2(v) for v in verts]) for a, p, verts in _p5_allreduce_8ppn()]


def _on_segment(q: _Point, a: _Point, b: _Point, eps: float = 1e-9) -> bool:
    (qx, qy), (ax, ay), (bx, by) = q, a, b
    cross = (bx - ax) * (qy - ay) - (by - ay) * (qx - ax)
    if abs(cross) > eps * max(1.0, math.hypot(bx - ax, by - ay)):
        return False
    return min(ax, bx) - eps <= qx <= max(ax, bx) + eps and min(ay, by) - eps <= qy <= max(ay, by) + eps


def _inside(q: _Point, poly: list[_Point]) -> bool:
    """Inside the polygon or on one of its edges (the plugin counts an edge as inside)."""
    n = len(poly)
    if any(_on_segment(q, poly[i], poly[(i + 1) % n]) for i in range(n)):
        return True
    x, y = q
    crossings = 0
    for i in range(n):
        (x1, y1), (x2, y2) = poly[i], poly[(i + 1) % n]
        if (y1 > y) != (y2 > y) and x < x1 + (y - y1) * (x2 - x1) / (y2 - y1):
            crossings += 1
    return crossings % 2 == 1


def aws_ofi_region_choice(op: str, nbytes: float, nranks: int, nnodes: int) -> tuple[str, str] | None:
    """(algorithm, protocol) of aws-ofi-nccl's P5 region tuner, or ``None`` where NCCL's tuner decides.

    Examples
    --------
    Two servers: the plugin leaves the choice to NCCL.

    >>> aws_ofi_region_choice("AllReduce", 1 << 30, 16, 2) is None
    True

    Four P5s (32 ranks): tree/LL128 up to ~36 MiB, ring/LL128 to ~1 GiB, ring/Simple beyond.

    >>> [aws_ofi_region_choice("AllReduce", s << 20, 32, 4) for s in (1, 256, 4096)]
    [('tree', 'LL128'), ('ring', 'LL128'), ('ring', 'Simple')]
    """
    if op != "AllReduce" or nnodes <= 2 or nranks != 8 * nnodes:
        return None
    q = _log2((float(nbytes), float(nranks)))
    for algo, proto, poly in _P5_AR_8PPN:
        if _inside(q, poly):
            return algo, proto
    return None


def net_tuner_choice(tuner: str | None, op: str, nbytes: float, nranks: int, nnodes: int) -> tuple[str, str] | None:
    """The choice of the net plugin's tuner ``tuner`` (``None``: no plugin tuner, or NCCL decides)."""
    if tuner == "aws-ofi":
        return aws_ofi_region_choice(op, nbytes, nranks, nnodes)
    return None
