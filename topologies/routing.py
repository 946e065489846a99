"""Paths between GPUs: ``ecmp``, ``spray``, ``single`` and ``dmodk`` routing, NVLink inside a server, PXN for rails.

One vectorised method serves every graph (presets, YAML graphs, presets with failed links removed):

1. **Inside an NVLink domain** (GPUs joined by NVSwitches) traffic takes NVLink: gpu -> nvswitch -> gpu.
2. **Between domains** traffic takes a shortest path (in hops) through the network switches; GPUs and
   NVSwitches never forward network traffic. Distances to every *target* (the set of access switches of a
   destination GPU) come from one breadth-first search per access switch (numpy, level by level; no
   scipy, whose import alone costs a fresh process about 0.3 s), and each switch keeps,
   per target, the list of its next hops that are one hop closer (a CSR table built with numpy). Flows then
   walk hop by hop, all at once as numpy arrays.
3. **Relays over NVLink.** When the destination cannot be reached through the network from the source GPU
   (``rail_only`` between rails, or a cut link), or when ``pxn=True``, the flow first hops over NVLink to
   the GPU of its own server that is closest to the destination through the network (NCCL's PXN: the GPU on
   the destination's rail; the source itself when no GPU is closer). If no GPU of the source server reaches
   the destination, the flow enters the network at the source and leaves it at the GPU of the destination
   server closest to it, then takes NVLink; failing that, both.

Modes:
``ecmp``   one path per flow: at each switch a hash of (src, dst, flow_key, seed, switch) picks one of the
           equal-cost next hops, as a switch hashes a packet's 5-tuple, so distinct flows collide as they
           would in a real fabric. Deterministic for a seed.
``single`` the same with ``flow_key`` ignored: one fixed path per (src, dst) pair.
``spray``  the flow's bytes split evenly over all equal-cost paths (each path ``1/n``). At most
           :data:`MAX_SPRAY_PATHS` paths per flow: beyond that, that many distinct paths evenly spaced in the
           ranked list of paths from a hashed offset.
``dmodk``  InfiniBand's destination routing: a switch forwards on the destination LID alone, from the
           linear forwarding table the subnet manager wrote; OpenSM's ``ftree`` routing fills it D-mod-k (at
           an upward hop the up-port is a digit of the destination's index, not a per-flow hash:
           :func:`topologies.route_walk.dmodk_digit`, the index :attr:`RouteTables.leaf_rank`). One path per
           destination GPU: ``flow_key``, ``seed`` and the source do not move it (a flow's path from the
           first switch where it meets another flow to the same destination is that flow's). Always walked
           in numpy (the compiled walk hashes; ``dmodk`` falls back to the numpy walk).

The pieces live one responsibility a module: the tables (:mod:`topologies.route_tables`), the network walk
(:mod:`topologies.route_walk`; its compiled twin :mod:`topologies.routing_numba`), relays and NVLink legs
(:mod:`topologies.route_relays`), the routes' CSR form and chaining (:mod:`topologies.routes`). This module
keeps :class:`Router`, which puts them together, and the size rule that picks the numpy or the compiled
walk (:func:`use_compiled_walk`; :data:`WALK` is the switch tests and the warm-up set on this module).
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path

import networkx as nx
import numpy as np

from topologies.errors import TopologyError
from topologies.numba_cache import compiled_pays, import_kernels, kernels_cached
from topologies.route_relays import choose_relays, nvlink_legs
from topologies.route_tables import INF, RouteTables, link_table
from topologies.route_walk import flow_hash, network_paths
from topologies.routes import Routes, chain_routes, lead_legs
from topologies.schema import gpu_name

#: Routing modes.
ROUTING_MODES: tuple[str, ...] = ("ecmp", "spray", "single", "dmodk")
#: Most sub-flows a sprayed flow is split into.
MAX_SPRAY_PATHS = 16

#: Route walk for ``ecmp`` and ``single``: "auto" (numpy until :func:`use_compiled_walk` says the compiled
#: walk of :mod:`topologies.routing_numba` pays for loading numba), "jit" (always) or "numpy" (never).
#: Routes are identical (tested); ``spray`` and ``dmodk`` always walk in numpy.
WALK = "auto"
#: CPU seconds to import numba and load the cached walk in a fresh process (``python
#: benchmarks/bench_scale.py --walk-crossover``: 1.0 s under a load average of 8, about 0.75 s quieter; the
#: same figure as :data:`sim.network.maxmin.JIT_LOAD_S`).
WALK_LOAD_S = 0.75
#: A batch of this many flows loads the compiled walk at once (the numpy walk alone costs about the load).
WALK_MIN_FLOWS = 2_500_000
#: The numpy walk's extra CPU over the compiled one, per :meth:`Router.route` call and per flow (fitted by
#: ``--walk-crossover`` on a 1,024-GPU fat-tree: 0.9 ms at 100 flows, 2.4 ms at 10k, 314 ms at 1M).
WALK_CALL_S = 0.9e-3
WALK_FLOW_S = 0.3e-6
_WALK: dict = {}
_WALK_SOURCE = str(Path(__file__).with_name("routing_numba.py"))
_WALK_SPENT = {"numpy_excess_s": 0.0}


def use_compiled_walk(flows: int = 0) -> bool:
    """Whether a batch of ``flows`` flows should be routed by the compiled walk.

    The rule of :func:`sim.network.maxmin.use_compiled` (ski rental): True when ``WALK`` is "jit"; when
    the walk is already loaded; when the batch has :data:`WALK_MIN_FLOWS` flows or more; and, where numba's
    cache holds the walk, when numba is already loaded in this process or the numpy walks so far have cost
    :data:`WALK_LOAD_S` more than the compiled walk would have (where it holds none: once they have cost
    :data:`topologies.numba_cache.COMPILE_S` more, the price of compiling it).
    False for ``WALK = "numpy"`` and where numba cannot load. So small inputs never import numba.

    Examples
    --------
    >>> use_compiled_walk(0) in (True, False)
    True
    """
    if WALK == "numpy":
        return False
    if WALK == "jit" or flows >= WALK_MIN_FLOWS or _WALK.get("mod") is not None:
        return _walk_kernels() is not None
    cached = kernels_cached(_WALK_SOURCE)
    return compiled_pays(_WALK_SPENT["numpy_excess_s"], WALK_LOAD_S, cached) and _walk_kernels() is not None


def charge_walk(excess_s: float) -> None:
    """Record CPU a numpy path spent beyond its compiled twin (it moves :func:`use_compiled_walk` closer to
    yes); the route walk charges its own, and a caller with kernels of its own may charge theirs."""
    _WALK_SPENT["numpy_excess_s"] += float(excess_s)


def _walk_kernels():
    if "mod" not in _WALK:
        _WALK["mod"] = import_kernels("topologies.routing_numba", forced=WALK == "jit")
    return _WALK["mod"]


class Router:
    """Routes flows between GPU slots over a topology graph.

    Parameters
    ----------
    graph : networkx.Graph
        Any topology with SPEC §4 attributes (links may have been removed or capacities changed).
    routing : {"ecmp", "spray", "single", "dmodk"}
        Path choice (see the module docstring).
    seed : int
        Seed of the ECMP hash.
    pxn : bool
        NCCL's PXN: between servers, first hop over NVLink to the GPU of the source server that is closest
        to the destination through the network (in rail fabrics: the GPU on the destination's rail).

    Attributes
    ----------
    links : pandas.DataFrame
        :func:`link_table` of the graph; link ids are its index.
    link_id : dict
        ``{(u, v): link id}`` for every directed link.

    Raises
    ------
    TopologyError
        Unknown routing mode, or a graph without GPUs.

    Examples
    --------
    >>> from topologies import fat_tree
    >>> router = Router(fat_tree(4, gpus_per_server=2), routing="ecmp", seed=0)
    >>> router.path(0, 15)[0], router.path(0, 15)[-1], len(router.path(0, 15))
    ('gpu0', 'gpu15', 7)
    """

    def __init__(self, graph: nx.Graph, routing: str = "ecmp", seed: int = 0, pxn: bool = False,
                 max_paths: int = MAX_SPRAY_PATHS):
        if routing not in ROUTING_MODES:
            raise TopologyError(f"routing must be one of {', '.join(ROUTING_MODES)}, got {routing!r}")
        if isinstance(max_paths, bool) or not isinstance(max_paths, int) or max_paths < 1:
            raise TopologyError(f"max_paths must be a positive int, got {max_paths!r}")
        self.graph = graph
        self.routing = routing
        self.seed = int(seed)
        self.pxn = bool(pxn)
        self.max_paths = max_paths
        self.name = graph.graph.get("name", "topology")
        self.links = link_table(graph)
        self._tables = RouteTables(graph, self.links)
        self.nodes = self._tables.nodes
        self.num_gpus = self._tables.num_gpus
        self._intra_cache: dict[tuple[int, int], list[int]] = {}

    @cached_property
    def link_id(self) -> dict:
        """``{(u, v): link id}`` for every directed link (built on first use: a million-entry dict at scale)."""
        return {(u, v): i for i, (u, v) in enumerate(zip(self.links["src"], self.links["dst"], strict=True))}

    # ------------------------------------------------------------------------------------------ API
    def route(self, src_gpu, dst_gpu, flow_key=0) -> Routes:
        """Route a batch of flows.

        Parameters
        ----------
        src_gpu, dst_gpu : array_like of int
            GPU slots (node ``gpu{i}``), equal length (scalars broadcast).
        flow_key : array_like of int
            Per-flow hash key (a 5-tuple stand-in: distinct keys may take distinct ECMP paths).

        Returns
        -------
        Routes
            CSR sub-flows and their links.

        Raises
        ------
        TopologyError
            A slot that is not a GPU of the graph, or a pair with no path (naming both GPUs).
        """
        src, dst, key = (np.array(x, dtype=np.int64)
                         for x in np.broadcast_arrays(*(np.atleast_1d(np.asarray(v, dtype=np.int64))
                                                        for v in (src_gpu, dst_gpu, flow_key))))
        for arr in (src, dst):
            bad = (arr < 0) | (arr >= self.num_gpus)
            if bad.any():
                raise TopologyError(f"{self.name}: gpu{arr[bad][0]} is not in the topology "
                                    f"(it has {self.num_gpus} GPUs, gpu0..gpu{self.num_gpus - 1})")
        f = len(src)
        jit = self.routing in ("ecmp", "single") and use_compiled_walk(f)
        kernels = _walk_kernels() if jit else None
        h = flow_hash(self.seed, self.routing == "single", src, dst, key, kernels)
        same = self._tables.domain[src] == self._tables.domain[dst]
        g, hh = src.copy(), dst.copy()  # network segment g -> hh for flows between domains
        inter = np.nonzero(~same)[0]
        if len(inter) and (self.pxn or not self._tables.all_direct):
            choose_relays(self._tables, src, dst, inter, g, hh, self.pxn, self.name)
        # NVLink legs: before the network (src -> g) and after (hh -> dst); whole path when in one domain
        pre_to = np.where(same, dst, g)
        pre = nvlink_legs(self._tables, src, pre_to, self._intra_cache, self.name)
        post = nvlink_legs(self._tables, np.where(same, dst, hh), dst, self._intra_cache, self.name)
        if kernels is not None:
            return self._route_compiled(kernels, g, hh, h, inter, pre, post)
        if self.routing in ("ecmp", "single") and WALK != "jit":
            charge_walk(WALK_CALL_S + WALK_FLOW_S * f)
        n_sub = np.ones(f, dtype=np.int64)
        net_rows = np.zeros((0, 0), dtype=np.int64)
        fraction_net = np.zeros(0)
        if len(inter):
            dest = self._tables.leaf_rank[hh[inter]] if self.routing == "dmodk" else None
            net_rows, net_count = network_paths(self._tables, g[inter], hh[inter], h[inter],
                                                self.routing == "spray", self.max_paths, self.name, dest)
            n_sub[inter] = net_count
            fraction_net = np.repeat(1.0 / net_count, net_count)
        if self.routing != "spray" or not len(inter):  # one sub-flow per flow: no expansion
            sub_ptr = np.arange(f + 1, dtype=np.int64)
            fraction = np.ones(f)
            if len(inter) == f:
                net = net_rows
            else:
                net = np.full((f, net_rows.shape[1]), -1, dtype=np.int64)
                net[inter] = net_rows
            parts = [m for m in (pre, net, post) if m.shape[1]]
        else:
            sub_ptr = np.concatenate([[0], np.cumsum(n_sub)])
            flow_of = np.repeat(np.arange(f), n_sub)
            is_net = np.repeat(~same, n_sub)
            net = np.full((len(flow_of), net_rows.shape[1]), -1, dtype=np.int64)
            net[is_net] = net_rows
            fraction = np.ones(len(flow_of))
            fraction[is_net] = fraction_net
            parts = [pre[flow_of], net, post[flow_of]]
        full = np.concatenate(parts, axis=1) if len(parts) > 1 else (parts[0] if parts else np.zeros((f, 0), np.int64))
        present = full >= 0
        link_ptr = np.concatenate([[0], np.cumsum(present.sum(axis=1))])
        return Routes(sub_ptr=sub_ptr, fraction=fraction, link_ptr=link_ptr, link_idx=full[present])

    def route_via(self, src_gpu, via_gpu, dst_gpu, key_in=0, key_out=0) -> Routes:
        """Routes of flows relayed through GPU ``via_gpu`` (``-1``: no relay): ``src -> via`` then ``via -> dst``.

        A streamed PXN relay (:func:`sim.planning.pxn.merge_streamed`) is one flow over both legs: its
        path is the sender's hop to the relay (NVLink, ``key_in``) followed by the relay's network path,
        hashed as the sender's connection (``key_out``), exactly the links the two legs would take as
        separate flows. A flow without a relay is routed as :meth:`route` routes ``src -> dst`` with
        ``key_out``. Sub-flows are every pair of the legs' sub-flows (fractions multiplied).

        Examples
        --------
        >>> from topologies import rail_optimized
        >>> router = Router(rail_optimized(num_gpus=16))
        >>> r = router.route_via([0, 0], [1, -1], [9, 9], 0, 7)
        >>> via = router.path_nodes(r.links_of(0))
        >>> via == router.path(0, 1) + router.path(1, 9, 7)[1:], router.path_nodes(r.links_of(1)) == router.path(0, 9, 7)
        (True, True)
        """
        src, via, dst, k_in, k_out = (np.array(x, dtype=np.int64) for x in np.broadcast_arrays(
            *(np.atleast_1d(np.asarray(v, dtype=np.int64)) for v in (src_gpu, via_gpu, dst_gpu, key_in, key_out))))
        has = via >= 0
        hop = np.where(has, via, src)
        second = self.route(hop, dst, k_out)
        if not has.any():
            return second
        lead = self.route(src[has], via[has], k_in[has])
        # the first legs of all flows: the relayed ones' routes, an empty leg (one sub-flow, no link) elsewhere
        first = lead_legs(has, lead)
        return chain_routes(first, second)

    def path_nodes(self, link_ids) -> list[str]:
        """Node names along a path given as link ids (source GPU first); ``[]`` for no links."""
        ids = np.asarray(link_ids, dtype=np.int64)
        if not len(ids):
            return []
        return [self.nodes[self._tables.lsrc[ids[0]]], *(self.nodes[x] for x in self._tables.ldst[ids])]

    def path(self, src_gpu: int, dst_gpu: int, flow_key: int = 0) -> list[str]:
        """Node names of the (first sub-flow's) path of one flow, ``gpu{src}`` first."""
        routes = self.route(src_gpu, dst_gpu, flow_key)
        return self.path_nodes(routes.links_of(0)) or [gpu_name(src_gpu)]

    # ------------------------------------------------------------------------------------ internals
    def _route_compiled(self, kernels, g, hh, h, inter, pre, post) -> Routes:
        """:meth:`route`'s network walk and CSR assembly for ``ecmp`` / ``single`` in one compiled loop."""
        f = len(g)
        net_of = np.full(f, -1, dtype=np.int64)
        net_of[inter] = np.arange(len(inter))
        a, b = g[inter], hh[inter]
        t = self._tables
        link_ptr, link_idx, bad = kernels.route_csr(
            pre, post, net_of, a, b, h[inter], t.target_of, t.dt, t.acc_sw, t.acc_lid, t.acc_down, t.nh_cnt,
            t.nh_ptr, t.nh_lid, t.sw_of, t.ldst, t.sw_node, t.S, int(INF))
        if bad >= 0:
            raise TopologyError(f"{self.name}: no path from gpu{a[bad]} to gpu{b[bad]}")
        return Routes(sub_ptr=np.arange(f + 1, dtype=np.int64), fraction=np.ones(f), link_ptr=link_ptr,
                      link_idx=link_idx)


__all__ = ["MAX_SPRAY_PATHS", "ROUTING_MODES", "WALK", "WALK_CALL_S", "WALK_FLOW_S", "WALK_LOAD_S", "WALK_MIN_FLOWS",
           "Router", "Routes", "chain_routes", "charge_walk", "link_table", "use_compiled_walk"]
