"""Paths between GPUs: ``ecmp``, ``spray`` and ``single`` routing, NVLink inside a server, PXN for rails.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import networkx as nx
import numpy as np
import pandas as pd

from topologies.errors import TopologyError
from topologies.numba_cache import compiled_pays, import_kernels, kernels_cached
from topologies.schema import NVLINK_NODE_KINDS, SWITCH_KINDS, gpu_name

#: Routing modes.
ROUTING_MODES: tuple[str, ...] = ("ecmp", "spray", "single")
#: Most sub-flows a sprayed flow is split into.
MAX_SPRAY_PATHS = 16

_INF = np.int32(1 << 20)
_U64 = np.uint64

#: Route walk for ``ecmp`` and ``single``: "auto" (numpy until :func:`use_compiled_walk` says the compiled
#: walk of :mod:`topologies.routing_numba` pays for loading numba), "jit" (always) or "numpy" (never).
#: Routes are identical (tested); ``spray`` always walks in numpy.
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


def link_table(graph: nx.Graph) -> pd.DataFrame:
    """One row per directed link: edge ``e`` of ``graph.edges`` gives links ``2e`` (u -> v) and ``2e+1``.

    Parameters
    ----------
    graph : networkx.Graph
        A topology (SPEC §4).

    Returns
    -------
    pandas.DataFrame
        Index ``link`` (int), columns ``src``, ``dst`` (node names), ``kind``, ``capacity_gbps``,
        ``latency_us``.

    Examples
    --------
    >>> g = nx.Graph(); g.add_edge("a", "b", kind="fabric", capacity_gbps=1.0, latency_us=0.0)
    >>> link_table(g)[["src", "dst"]].values.tolist()
    [['a', 'b'], ['b', 'a']]
    """
    edges = list(graph.edges(data=True))
    src = [x for u, v, _ in edges for x in (u, v)]
    dst = [x for u, v, _ in edges for x in (v, u)]
    table = pd.DataFrame({
        "src": pd.Series(src, dtype=object),
        "dst": pd.Series(dst, dtype=object),
        "kind": pd.Series([d.get("kind", "") for _, _, d in edges for _ in (0, 1)], dtype=object),
        "capacity_gbps": np.repeat([float(d["capacity_gbps"]) for _, _, d in edges], 2).astype(float),
        "latency_us": np.repeat([float(d.get("latency_us", 0.0)) for _, _, d in edges], 2).astype(float),
    })
    table.index.name = "link"
    return table


@dataclass(frozen=True)
class Routes:
    """Routes of a batch of flows, in CSR form.

    Flow ``i`` has sub-flows ``j`` in ``[sub_ptr[i], sub_ptr[i+1])``; sub-flow ``j`` carries
    ``fraction[j]`` of the flow's bytes over links ``link_idx[link_ptr[j]:link_ptr[j+1]]``, ordered from
    source to destination. A flow from a GPU to itself has one sub-flow with no links. ``sub_ptr``,
    ``link_ptr`` and ``link_idx`` are int64 arrays, ``fraction`` float64 (summing to 1 per flow).
    """

    sub_ptr: np.ndarray
    fraction: np.ndarray
    link_ptr: np.ndarray
    link_idx: np.ndarray

    @property
    def flow_of_sub(self) -> np.ndarray:
        """Flow index of every sub-flow."""
        return np.repeat(np.arange(len(self.sub_ptr) - 1), np.diff(self.sub_ptr))

    def links_of(self, sub: int) -> np.ndarray:
        """Link ids of sub-flow ``sub``."""
        return self.link_idx[self.link_ptr[sub]:self.link_ptr[sub + 1]]


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: a fast, well-spread 64-bit hash of uint64 arrays."""
    x = x + _U64(0x9E3779B97F4A7C15)  # a new array; the rest in place (the same arithmetic, fewer temporaries)
    x ^= x >> _U64(30)
    x *= _U64(0xBF58476D1CE4E5B9)
    x ^= x >> _U64(27)
    x *= _U64(0x94D049BB133111EB)
    x ^= x >> _U64(31)
    return x


class Router:
    """Routes flows between GPU slots over a topology graph.

    Parameters
    ----------
    graph : networkx.Graph
        Any topology with SPEC §4 attributes (links may have been removed or capacities changed).
    routing : {"ecmp", "spray", "single"}
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
        self.nodes = list(graph.nodes)
        index = {n: i for i, n in enumerate(self.nodes)}
        self._lsrc = np.array([index[n] for n in self.links["src"]], dtype=np.int64)
        self._ldst = np.array([index[n] for n in self.links["dst"]], dtype=np.int64)
        n = len(self.nodes)
        keys = self._lsrc * n + self._ldst
        self._key_order = np.argsort(keys, kind="stable")
        self._sorted_keys = keys[self._key_order]
        kinds = np.array([graph.nodes[x].get("kind", "") for x in self.nodes], dtype=object)
        self._gpu_node = self._gpu_nodes(graph, index)
        self.num_gpus = len(self._gpu_node)
        self._build_domains(graph, kinds)
        self._build_network(kinds)

    @cached_property
    def link_id(self) -> dict:
        """``{(u, v): link id}`` for every directed link (built on first use: a million-entry dict at scale)."""
        return {(u, v): i for i, (u, v) in enumerate(zip(self.links["src"], self.links["dst"], strict=True))}

    # ----------------------------------------------------------------------------------------- set-up
    @staticmethod
    def _gpu_nodes(graph: nx.Graph, index: dict) -> np.ndarray:
        slots = []
        for slot in range(graph.number_of_nodes()):
            name = gpu_name(slot)
            if name not in index or graph.nodes[name].get("kind") != "gpu":
                break
            slots.append(index[name])
        if not slots:
            raise TopologyError(f"{graph.graph.get('name', 'topology')}: no GPU node gpu0")
        return np.array(slots, dtype=np.int64)

    def _lookup(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Link ids of directed links u -> v (node indices); -1 where there is no such link."""
        keys = np.asarray(u, dtype=np.int64) * len(self.nodes) + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self._sorted_keys, keys)
        pos = np.minimum(pos, len(self._sorted_keys) - 1)
        found = self._sorted_keys[pos] == keys if len(self._sorted_keys) else np.zeros(len(keys), bool)
        return np.where(found, self._key_order[pos], -1)

    def _build_domains(self, graph: nx.Graph, kinds: np.ndarray) -> None:
        """NVLink domains: components of the GPU/NVSwitch subgraph over GPU/NVSwitch-only edges."""
        nv = kinds[self._lsrc].astype(str)
        is_nv = np.isin(nv, list(NVLINK_NODE_KINDS)) & np.isin(kinds[self._ldst].astype(str), list(NVLINK_NODE_KINDS))
        self._nvlink_graph = nx.Graph()
        self._nvlink_graph.add_nodes_from(int(x) for x in self._gpu_node)
        self._nvlink_graph.add_edges_from(zip(self._lsrc[is_nv].tolist(), self._ldst[is_nv].tolist(), strict=True))
        comp_of = {}
        for cid, comp in enumerate(nx.connected_components(self._nvlink_graph)):
            for x in comp:
                comp_of[x] = cid
        self._domain = np.array([comp_of[int(x)] for x in self._gpu_node], dtype=np.int64)
        # Star domains (each GPU on exactly one NVSwitch, no GPU-GPU NVLink): vectorised intra paths.
        nvs = np.full(self.num_gpus, -1, dtype=np.int64)
        for slot, node in enumerate(self._gpu_node.tolist()):
            nbrs = list(self._nvlink_graph.neighbors(node))
            if len(nbrs) == 1 and kinds[nbrs[0]] == "nvswitch":
                nvs[slot] = nbrs[0]
        self._nvs_of = nvs
        has = nvs >= 0
        self._up = np.where(has, self._lookup(self._gpu_node, np.where(has, nvs, 0)), -1)
        self._down = np.where(has, self._lookup(np.where(has, nvs, 0), self._gpu_node), -1)
        order = np.argsort(self._domain, kind="stable")
        sizes = np.bincount(self._domain)
        width = int(sizes.max())
        members = np.full((len(sizes), width), -1, dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        col = np.arange(self.num_gpus) - np.repeat(start, sizes)
        members[self._domain[order], col] = order
        self._members = members
        self._intra_cache: dict[tuple[int, int], list[int]] = {}

    def _build_network(self, kinds: np.ndarray) -> None:
        """Switch graph, per-GPU access switches, distances to every target, next-hop tables."""
        n = len(self.nodes)
        is_sw = np.isin(kinds.astype(str), list(SWITCH_KINDS))
        sw_nodes = np.nonzero(is_sw)[0]
        self._S = S = len(sw_nodes)
        self._sw_node = sw_nodes
        sw_of = np.full(n + 1, S, dtype=np.int64)  # S = "no switch"
        sw_of[sw_nodes] = np.arange(S)
        self._sw_of = sw_of
        # access links: GPU -> switch
        gpu_mask = np.zeros(n, dtype=bool)
        gpu_mask[self._gpu_node] = True
        slot_of = np.full(n, -1, dtype=np.int64)
        slot_of[self._gpu_node] = np.arange(self.num_gpus)
        acc = gpu_mask[self._lsrc] & is_sw[self._ldst]
        acc_slot, acc_sw, acc_lid = slot_of[self._lsrc[acc]], sw_of[self._ldst[acc]], np.nonzero(acc)[0]
        order = np.lexsort((acc_sw, acc_slot))
        acc_slot, acc_sw, acc_lid = acc_slot[order], acc_sw[order], acc_lid[order]
        per = np.bincount(acc_slot, minlength=self.num_gpus)
        width = max(1, int(per.max()) if len(per) else 1)
        col = np.arange(len(acc_slot)) - np.repeat(np.concatenate([[0], np.cumsum(per)[:-1]]), per)
        self._acc_sw = np.full((self.num_gpus, width), S, dtype=np.int64)
        self._acc_lid = np.full((self.num_gpus, width), -1, dtype=np.int64)
        self._acc_sw[acc_slot, col] = acc_sw
        self._acc_lid[acc_slot, col] = acc_lid
        # targets: distinct access-switch sets (GPUs without any access link get target T = "none")
        sets, target_of = np.unique(self._acc_sw, axis=0, return_inverse=True)
        target_of = target_of.reshape(-1)
        real = ~(sets == S).all(axis=1)
        remap = np.full(len(sets), -1, dtype=np.int64)
        remap[real] = np.arange(int(real.sum()))
        sets = sets[real]
        self._T = T = len(sets)
        remap[~real] = T
        self._target_of = remap[target_of]
        # distances: BFS from every access switch over switch-switch links
        net = is_sw[self._lsrc] & is_sw[self._ldst]
        self._sl_src, self._sl_dst, self._sl_id = sw_of[self._lsrc[net]], sw_of[self._ldst[net]], np.nonzero(net)[0]
        order = np.argsort(self._sl_src, kind="stable")
        self._sl_src, self._sl_dst, self._sl_id = self._sl_src[order], self._sl_dst[order], self._sl_id[order]
        dt = np.full((T + 1, S + 1), _INF, dtype=np.int32)
        if T and S:
            sources = np.unique(sets[sets < S])
            dist = _bfs_hops(self._sl_src, self._sl_dst, S, sources)
            dist = np.where(dist < _INF, dist + 1, _INF).astype(np.int32)
            row_of = np.full(S + 1, len(sources), dtype=np.int64)
            row_of[sources] = np.arange(len(sources))
            dist = np.vstack([dist, np.full((1, S), _INF, dtype=np.int32)])
            dt[:T, :S] = dist[row_of[sets]].min(axis=1)
        self._dt = dt
        # TT[a, b]: network hops from a GPU of target a to a GPU of target b, minus one (the access hop)
        tt = np.full((T + 1, T + 1), _INF, dtype=np.int32)
        if T:
            tt[:T, :] = dt.T[sets].min(axis=1)
        self._tt = tt
        self._build_next_hops()

    def _build_next_hops(self) -> None:
        """CSR ``(target, switch) -> links one hop closer to the target``."""
        T, S = self._T, self._S
        dt = self._dt
        counts = np.zeros(T * S, dtype=np.int64)
        lids = []
        n_links = max(1, len(self._sl_src))
        chunk = max(1, (1 << 23) // n_links)
        for t0 in range(0, T, chunk):
            block = dt[t0:t0 + chunk, :S]
            dx, dy = block[:, self._sl_src], block[:, self._sl_dst]
            rows, cols = np.nonzero((dy == dx - 1) & (dx < _INF))
            keys = (rows + t0) * S + self._sl_src[cols]
            counts += np.bincount(keys, minlength=T * S)
            lids.append(self._sl_id[cols])
        self._nh_cnt = counts
        self._nh_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self._nh_lid = np.concatenate(lids) if lids else np.zeros(0, dtype=np.int64)

    @cached_property
    def _num_paths(self) -> np.ndarray:
        """Equal-cost paths from switch x to the GPUs of target t, flat ``t * S + x`` (float: exact to 2**53)."""
        T, S = self._T, self._S
        dt = self._dt[:T, :S].reshape(-1)
        paths = (dt == 1).astype(np.float64)
        keys = np.repeat(np.arange(T * S), self._nh_cnt)
        nxt = (keys // S) * S + self._sw_of[self._ldst[self._nh_lid]]
        level = dt[keys]
        for d in range(2, int(level.max(initial=1)) + 1):
            m = level == d
            paths += np.bincount(keys[m], weights=paths[nxt[m]], minlength=T * S)
        return paths

    @cached_property
    def _nh_cum(self) -> np.ndarray:
        """Running total, over the whole next-hop table, of the paths behind each next hop (non-decreasing)."""
        S = self._S
        target = np.repeat(np.arange(self._T * S) // max(S, 1), self._nh_cnt)
        return np.cumsum(self._num_paths[target * S + self._sw_of[self._ldst[self._nh_lid]]])

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
        jit = self.routing != "spray" and use_compiled_walk(f)
        kernels = _walk_kernels() if jit else None
        h = self._flow_hash(src, dst, key, kernels)
        same = self._domain[src] == self._domain[dst]
        g, hh = src.copy(), dst.copy()  # network segment g -> hh for flows between domains
        inter = np.nonzero(~same)[0]
        if len(inter) and (self.pxn or not self._all_direct):
            self._choose_relays(src, dst, inter, g, hh)
        # NVLink legs: before the network (src -> g) and after (hh -> dst); whole path when in one domain
        pre_to = np.where(same, dst, g)
        pre = self._intra(src, pre_to)
        post = self._intra(np.where(same, dst, hh), dst)
        if kernels is not None:
            return self._route_compiled(kernels, g, hh, h, inter, pre, post)
        if self.routing != "spray" and WALK != "jit":
            charge_walk(WALK_CALL_S + WALK_FLOW_S * f)
        n_sub = np.ones(f, dtype=np.int64)
        net_rows = np.zeros((0, 0), dtype=np.int64)
        fraction_net = np.zeros(0)
        if len(inter):
            net_rows, net_count = self._network(g[inter], hh[inter], h[inter])
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
        n_sub = np.ones(len(src), dtype=np.int64)
        n_sub[has] = np.diff(lead.sub_ptr)
        sub_ptr = np.zeros(len(src) + 1, dtype=np.int64)
        np.cumsum(n_sub, out=sub_ptr[1:])
        mine = np.repeat(has, n_sub)
        fraction = np.ones(int(sub_ptr[-1]))
        fraction[mine] = lead.fraction
        n_links = np.zeros(len(fraction), dtype=np.int64)
        n_links[mine] = np.diff(lead.link_ptr)
        link_ptr = np.zeros(len(fraction) + 1, dtype=np.int64)
        np.cumsum(n_links, out=link_ptr[1:])
        first = Routes(sub_ptr=sub_ptr, fraction=fraction, link_ptr=link_ptr,
                       link_idx=lead.link_idx[lead.link_ptr[0]:lead.link_ptr[-1]])
        return chain_routes(first, second)

    def path_nodes(self, link_ids) -> list[str]:
        """Node names along a path given as link ids (source GPU first); ``[]`` for no links."""
        ids = np.asarray(link_ids, dtype=np.int64)
        if not len(ids):
            return []
        return [self.nodes[self._lsrc[ids[0]]], *(self.nodes[x] for x in self._ldst[ids])]

    def path(self, src_gpu: int, dst_gpu: int, flow_key: int = 0) -> list[str]:
        """Node names of the (first sub-flow's) path of one flow, ``gpu{src}`` first."""
        routes = self.route(src_gpu, dst_gpu, flow_key)
        return self.path_nodes(routes.links_of(0)) or [gpu_name(src_gpu)]

    # ------------------------------------------------------------------------------------ internals
    @cached_property
    def _all_direct(self) -> bool:
        """Every GPU reaches every other GPU's access switches through the network (no relays needed)."""
        t = self._target_of
        return bool((t < self._T).all()) and bool((self._tt[:self._T, :self._T] < _INF).all())

    @cached_property
    def _acc_down(self) -> np.ndarray:
        """Link from each GPU's access switch ``_acc_sw[g, c]`` down to GPU ``g`` (-1 where none)."""
        has = self._acc_sw < self._S
        if not has.any():  # no network switch at all (an NVLink-only graph)
            return np.full(self._acc_sw.shape, -1, dtype=np.int64)
        sw = self._sw_node[np.where(has, self._acc_sw, 0)]
        down = self._lookup(sw.reshape(-1), np.repeat(self._gpu_node, self._acc_sw.shape[1])).reshape(sw.shape)
        return np.where(has, down, -1)

    def _route_compiled(self, kernels, g, hh, h, inter, pre, post) -> Routes:
        """:meth:`route`'s network walk and CSR assembly for ``ecmp`` / ``single`` in one compiled loop."""
        f = len(g)
        net_of = np.full(f, -1, dtype=np.int64)
        net_of[inter] = np.arange(len(inter))
        a, b = g[inter], hh[inter]
        link_ptr, link_idx, bad = kernels.route_csr(
            pre, post, net_of, a, b, h[inter], self._target_of, self._dt, self._acc_sw, self._acc_lid,
            self._acc_down, self._nh_cnt, self._nh_ptr, self._nh_lid, self._sw_of, self._ldst, self._sw_node,
            self._S, int(_INF))
        if bad >= 0:
            raise TopologyError(f"{self.name}: no path from gpu{a[bad]} to gpu{b[bad]}")
        return Routes(sub_ptr=np.arange(f + 1, dtype=np.int64), fraction=np.ones(f), link_ptr=link_ptr,
                      link_idx=link_idx)

    def _flow_hash(self, src, dst, key, kernels=None) -> np.ndarray:
        if self.routing == "single":
            key = np.zeros_like(key)
        if kernels is not None:
            seed = np.array([self.seed], dtype=np.int64).astype(_U64)[0]
            return kernels.flow_hash(seed, src.astype(_U64), dst.astype(_U64), key.astype(_U64))
        with np.errstate(over="ignore"):
            h = _mix(np.full(len(src), self.seed, dtype=np.int64).astype(_U64) ^ _mix(src.astype(_U64)))
            h = _mix(h ^ _mix(dst.astype(_U64) + _U64(0x632BE59BD9B4E019)))
            return _mix(h ^ key.astype(_U64))

    def _choose_relays(self, src, dst, inter, g, hh) -> None:
        """Fill g (network entry GPU) and hh (network exit GPU) for flows ``inter`` between domains."""
        tt, tgt = self._tt, self._target_of
        s, d = src[inter], dst[inter]
        direct = tt[tgt[s], tgt[d]] < _INF
        need = np.ones(len(inter), dtype=bool) if self.pxn else ~direct
        if not need.any():
            return
        idx = np.nonzero(need)[0]
        s, d = s[idx], d[idx]
        # source side: the GPU of the source's domain closest to d; the source itself on ties
        cand = self._members[self._domain[s]]
        dist = np.where(cand >= 0, tt[tgt[np.maximum(cand, 0)], tgt[d][:, None]], _INF).astype(np.int64)
        best = (2 * dist + (cand != s[:, None])).argmin(axis=1)  # the source wins a tie: no NVLink detour
        ok = dist[np.arange(len(idx)), best] < _INF
        g[inter[idx[ok]]] = cand[np.nonzero(ok)[0], best[ok]]
        rest = np.nonzero(~ok)[0]
        if not len(rest):
            return
        s, d = s[rest], d[rest]
        cand_d = self._members[self._domain[d]]
        dist = np.where(cand_d >= 0, tt[tgt[s][:, None], tgt[np.maximum(cand_d, 0)]], _INF)
        best = dist.argmin(axis=1)
        ok = dist[np.arange(len(rest)), best] < _INF
        hh[inter[idx[rest[ok]]]] = cand_d[np.nonzero(ok)[0], best[ok]]
        rest2 = np.nonzero(~ok)[0]
        if not len(rest2):
            return
        s, d = s[rest2], d[rest2]
        cs, cd = self._members[self._domain[s]], self._members[self._domain[d]]
        both = tt[tgt[np.maximum(cs, 0)][:, :, None], tgt[np.maximum(cd, 0)][:, None, :]]
        both = np.where((cs >= 0)[:, :, None] & (cd >= 0)[:, None, :], both, _INF)
        flat = both.reshape(len(rest2), -1).argmin(axis=1)
        bi, bj = np.divmod(flat, cd.shape[1])
        rows = np.arange(len(rest2))
        if (both[rows, bi, bj] >= _INF).any():
            k = int(np.nonzero(both[rows, bi, bj] >= _INF)[0][0])
            raise TopologyError(f"{self.name}: no path from gpu{s[k]} to gpu{d[k]}")
        out = inter[idx[rest[rest2]]]
        g[out] = cs[rows, bi]
        hh[out] = cd[rows, bj]

    def _intra(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """NVLink paths a -> b inside a domain as a padded (n, width) link matrix; no links where a == b."""
        n = len(a)
        star = (a != b) & (self._nvs_of[a] >= 0) & (self._nvs_of[a] == self._nvs_of[b])
        other = np.nonzero((a != b) & ~star)[0]
        width = 2
        paths = {}
        for i in other.tolist():
            pair = (int(a[i]), int(b[i]))
            if pair not in self._intra_cache:
                try:
                    nodes = nx.shortest_path(self._nvlink_graph, int(self._gpu_node[pair[0]]),
                                             int(self._gpu_node[pair[1]]))
                except nx.NetworkXNoPath:
                    raise TopologyError(f"{self.name}: no NVLink path from gpu{pair[0]} to gpu{pair[1]}") from None
                self._intra_cache[pair] = self._lookup(np.array(nodes[:-1]), np.array(nodes[1:])).tolist()
            paths[i] = self._intra_cache[pair]
            width = max(width, len(paths[i]))
        out = np.full((n, width if (star.any() or paths) else 0), -1, dtype=np.int64)
        if star.any():
            out[star, 0] = self._up[a[star]]
            out[star, 1] = self._down[b[star]]
        for i, links in paths.items():
            out[i, :len(links)] = links
        return out

    def _network(self, a: np.ndarray, b: np.ndarray, h: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Network paths GPU a -> GPU b: (sub-flow link matrix, sub-flows per flow)."""
        t = self._target_of[b]
        acc_d = self._dt[t[:, None], self._acc_sw[a]]
        best = acc_d.min(axis=1)
        if (best >= _INF).any():
            k = int(np.nonzero(best >= _INF)[0][0])
            raise TopologyError(f"{self.name}: no path from gpu{a[k]} to gpu{b[k]}")
        if self.routing == "spray":
            return self._spray(a, b, t, h, acc_d, best)
        ismin = acc_d == best[:, None]
        choice = _nth_true(ismin, (h % ismin.sum(axis=1).astype(_U64)).astype(np.int64))
        length = best.astype(np.int64) + 1
        out = np.full((len(a), int(length.max())), -1, dtype=np.int64)
        out[:, 0] = self._acc_lid[a, choice]
        # Flows a length at a time: a hop of a shortest path is one step closer to the target, so a flow of
        # length L is at its last switch after L - 1 hops, and a group walks without masks or gathers.
        order = np.argsort(length, kind="stable")
        cuts = np.flatnonzero(np.diff(length[order])) + 1
        salt = self._sw_node.astype(_U64) * _U64(0xD6E8FEB86659FD93)
        for sel in np.split(order, cuts):
            steps = int(length[sel[0]])
            x = self._acc_sw[a[sel], choice[sel]]
            base = t[sel] * self._S
            hs = h[sel]
            for step in range(1, steps - 1):
                key = base + x
                with np.errstate(over="ignore"):
                    hop = _mix(hs ^ salt[x])
                j = (hop % self._nh_cnt[key].astype(_U64)).astype(np.int64)
                lid = self._nh_lid[self._nh_ptr[key] + j]
                out[sel, step] = lid
                x = self._sw_of[self._ldst[lid]]
            if steps > 1:
                out[sel, steps - 1] = self._lookup(self._sw_node[x], self._gpu_node[b[sel]])
        return out, np.ones(len(a), dtype=np.int64)

    def _spray(self, a, b, t, h, acc_d, best) -> tuple[np.ndarray, np.ndarray]:
        """All equal-cost paths (at most ``max_paths``), each as one sub-flow."""
        paths = self._num_paths
        S = self._S
        acc_paths = np.where(acc_d == best[:, None], paths[t[:, None] * S + np.minimum(self._acc_sw[a], S - 1)], 0.0)
        total = acc_paths.sum(axis=1)
        count = np.minimum(total, self.max_paths).astype(np.int64)
        flow = np.repeat(np.arange(len(a)), count)
        i = np.arange(len(flow)) - np.repeat(np.concatenate([[0], np.cumsum(count)[:-1]]), count)
        offset = (h >> _U64(11)).astype(np.float64) / float(1 << 53)
        spread = total[flow] > self.max_paths
        rank = np.where(spread, np.floor((i + offset[flow]) * total[flow] / np.maximum(count[flow], 1)), i)
        rank = np.minimum(rank, total[flow] - 1)
        choice, rank = _unrank(acc_paths[flow], rank)
        af, tf, bf = a[flow], t[flow], b[flow]
        x = self._acc_sw[af, choice]
        length = best[flow].astype(np.int64) + 1
        out = np.full((len(flow), int(length.max())), -1, dtype=np.int64)
        out[:, 0] = self._acc_lid[af, choice]
        cum = self._nh_cum
        for step in range(1, out.shape[1]):
            act = np.nonzero(length > step)[0]
            xs, ts = x[act], tf[act]
            last = self._dt[ts, xs] == 1
            fin = act[last]
            out[fin, step] = self._lookup(self._sw_node[xs[last]], self._gpu_node[bf[fin]])
            mid = act[~last]
            start = self._nh_ptr[ts[~last] * S + xs[~last]]
            base = np.where(start > 0, cum[np.maximum(start - 1, 0)], 0.0)
            # the next hop whose cumulative path-count interval holds the rank (one global sorted array)
            entry = _search_segments(cum, start, self._nh_cnt[ts[~last] * S + xs[~last]], base + rank[mid])
            rank[mid] -= np.where(entry > start, cum[np.maximum(entry - 1, 0)], base) - base
            lid = self._nh_lid[entry]
            out[mid, step] = lid
            x[mid] = self._sw_of[self._ldst[lid]]
        return out, count


def chain_routes(first: Routes, second: Routes) -> Routes:
    """Flow ``i`` of ``first`` followed by flow ``i`` of ``second``: every pair of their sub-flows, links of
    the first leg then the second's, fractions multiplied.

    Examples
    --------
    >>> a = Routes(np.array([0, 1, 2]), np.ones(2), np.array([0, 1, 1]), np.array([4]))
    >>> b = Routes(np.array([0, 1, 3]), np.array([1.0, 0.5, 0.5]), np.array([0, 2, 3, 4]), np.array([5, 6, 7, 8]))
    >>> c = chain_routes(a, b)
    >>> c.sub_ptr.tolist(), c.fraction.tolist(), [c.links_of(j).tolist() for j in range(3)]
    ([0, 1, 3], [1.0, 0.5, 0.5], [[4, 5, 6], [7], [8]])
    """
    na, nb = np.diff(first.sub_ptr), np.diff(second.sub_ptr)
    n = na * nb
    sub_ptr = np.zeros(len(n) + 1, dtype=np.int64)
    np.cumsum(n, out=sub_ptr[1:])
    flow = np.repeat(np.arange(len(n), dtype=np.int64), n)
    k = np.arange(int(sub_ptr[-1]), dtype=np.int64) - sub_ptr[:-1][flow]
    ia = first.sub_ptr[:-1][flow] + k // nb[flow]
    ib = second.sub_ptr[:-1][flow] + k % nb[flow]
    la = np.diff(first.link_ptr)[ia]
    lb = np.diff(second.link_ptr)[ib]
    link_ptr = np.zeros(len(ia) + 1, dtype=np.int64)
    np.cumsum(la + lb, out=link_ptr[1:])
    link_idx = np.empty(int(link_ptr[-1]), dtype=np.int64)
    for legs, rows, count, at in ((first, ia, la, link_ptr[:-1]), (second, ib, lb, link_ptr[:-1] + la)):
        off = np.arange(int(count.sum()), dtype=np.int64) - np.repeat(np.cumsum(count) - count, count)
        link_idx[np.repeat(at, count) + off] = legs.link_idx[np.repeat(legs.link_ptr[:-1][rows], count) + off]
    return Routes(sub_ptr=sub_ptr, fraction=first.fraction[ia] * second.fraction[ib], link_ptr=link_ptr,
                  link_idx=link_idx)


def _bfs_hops(edge_src: np.ndarray, edge_dst: np.ndarray, n: int, sources: np.ndarray) -> np.ndarray:
    """Hops from each source to every node over directed edges (``edge_src`` sorted), ``_INF`` if unreachable.

    A breadth-first search of all sources at once, a level at a time: the frontier's out-edges come from a
    CSR of the edges, and a node joins the next level the first time one reaches it. Sources are taken in
    blocks so the temporaries stay near 4 M entries.

    Examples
    --------
    >>> _bfs_hops(np.array([0, 1, 2]), np.array([1, 2, 0]), 4, np.array([0, 2])).tolist()
    [[0, 1, 2, 1048576], [1, 2, 0, 1048576]]
    """
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_src, minlength=n), out=ptr[1:])
    deg = np.diff(ptr)
    out = np.full((len(sources), n), _INF, dtype=np.int32)
    block = max(1, (1 << 22) // max(len(edge_src), n, 1))
    for lo in range(0, len(sources), block):
        d = out[lo:lo + block]
        rows = np.arange(len(d))
        d[rows, sources[lo:lo + block]] = 0
        flat = d.reshape(-1)
        frontier = rows * n + sources[lo:lo + block]
        level = 0
        while len(frontier):
            level += 1
            row, node = np.divmod(frontier, n)
            count = deg[node]
            first = np.repeat(ptr[node] - np.cumsum(count) + count, count)
            cand = np.repeat(row * n, count) + edge_dst[first + np.arange(count.sum())]
            cand = cand[flat[cand] == _INF]
            flat[cand] = level
            frontier = np.flatnonzero(flat == level) if len(cand) else cand
    return out


def _search_segments(values: np.ndarray, start: np.ndarray, count: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per query, the first index in ``[start, start + count)`` with ``values > query`` (values sorted there).

    A vectorised binary search inside each short segment: a few cache-friendly passes instead of a search of
    the whole table per query.
    """
    lo, hi = start.copy(), start + count
    while True:
        open_ = lo < hi
        if not open_.any():
            return lo
        mid = (lo + hi) // 2
        right = open_ & (values[np.minimum(mid, len(values) - 1)] <= query)
        lo = np.where(right, mid + 1, lo)
        hi = np.where(open_ & ~right, mid, hi)


def _nth_true(mask: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Column of the n-th (0-based) True of each row of ``mask``."""
    if mask.shape[1] == 1:
        return np.zeros(len(mask), dtype=np.int64)
    return np.argmax(np.cumsum(mask, axis=1) > n[:, None], axis=1)


def _unrank(weights: np.ndarray, rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pick the column whose cumulative weight interval holds ``rank``; return it and the rank within it."""
    cum = np.cumsum(weights, axis=1)
    pick = np.argmax(cum > rank[:, None], axis=1)
    before = np.where(pick > 0, cum[np.arange(len(rank)), np.maximum(pick - 1, 0)], 0.0)
    return pick, rank - before


__all__ = ["MAX_SPRAY_PATHS", "ROUTING_MODES", "WALK", "WALK_CALL_S", "WALK_FLOW_S", "WALK_LOAD_S", "WALK_MIN_FLOWS",
           "Router", "Routes", "chain_routes", "charge_walk", "link_table", "use_compiled_walk"]
