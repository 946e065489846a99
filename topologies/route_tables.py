"""The router's tables: directed links, NVLink domains, access switches, distances and next hops.

Built once per graph by :class:`RouteTables` (numpy; no scipy, whose import alone costs a fresh process
about 0.3 s) and read by the walks of :mod:`topologies.route_walk` and :mod:`topologies.route_relays`:

- every directed link (:func:`link_table`) and a sorted key for looking links up by their two nodes;
- the NVLink domains (components of the GPU/NVSwitch subgraph), with their members and, for star domains,
  each GPU's up- and down-links to its NVSwitch;
- the network: each GPU's access switches, the *targets* (distinct sets of access switches), the hops from
  every switch to every target (one breadth-first search per access switch, :func:`bfs_hops`), and per
  (target, switch) the links one hop closer (a CSR table), with the equal-cost path counts spray needs.
"""

from __future__ import annotations

from functools import cached_property

import networkx as nx
import numpy as np
import pandas as pd

from topologies.errors import TopologyError
from topologies.schema import NVLINK_NODE_KINDS, SWITCH_KINDS, gpu_name

#: Hops of an unreachable node (int32).
INF = np.int32(1 << 20)


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


class RouteTables:
    """Everything a route walk reads, built from a graph and its :func:`link_table`.

    Parameters
    ----------
    graph : networkx.Graph
        Any topology with SPEC §4 attributes.
    links : pandas.DataFrame
        ``link_table(graph)``: link ids are its index.

    Attributes
    ----------
    nodes : list
        Node names; node indices below are positions in it.
    lsrc, ldst : numpy.ndarray
        Source and destination node index of every link.
    gpu_node : numpy.ndarray
        Node index of each GPU slot (``gpu0``, ``gpu1``, ... while they exist).
    domain, members, nvs_of, up, down, nvlink_graph
        NVLink domain of each GPU, the GPUs of each domain (padded with -1), each GPU's NVSwitch in a star
        domain (-1 elsewhere) with its up- and down-link, and the NVLink graph over node indices.
    S, sw_node, sw_of
        Number of network switches, their node indices, and the switch number of every node (``S``: none).
    acc_sw, acc_lid, T, target_of
        Per GPU its access switches and links (padded with ``S`` / -1); the number of targets and each
        GPU's target (``T``: none).
    dt, tt
        Hops from each switch to each target's GPUs ``dt[t, x]``; GPU-target to GPU-target hops minus the
        access hop ``tt[a, b]`` (``INF`` where unreachable).
    nh_cnt, nh_ptr, nh_lid
        CSR ``(target, switch) -> links one hop closer to the target``, flat key ``t * S + x``.

    Raises
    ------
    TopologyError
        A graph without GPUs.

    Examples
    --------
    >>> from topologies import fat_tree
    >>> g = fat_tree(4, gpus_per_server=2)
    >>> t = RouteTables(g, link_table(g))
    >>> t.num_gpus, bool(t.all_direct)
    (16, True)
    >>> int(t.tt[t.target_of[0], t.target_of[15]])  # edge, aggregation, core, aggregation, edge, GPU: 6 links - 1
    5
    """

    def __init__(self, graph: nx.Graph, links: pd.DataFrame):
        self.nodes = list(graph.nodes)
        index = {n: i for i, n in enumerate(self.nodes)}
        self.lsrc = np.array([index[n] for n in links["src"]], dtype=np.int64)
        self.ldst = np.array([index[n] for n in links["dst"]], dtype=np.int64)
        n = len(self.nodes)
        keys = self.lsrc * n + self.ldst
        self._key_order = np.argsort(keys, kind="stable")
        self._sorted_keys = keys[self._key_order]
        kinds = np.array([graph.nodes[x].get("kind", "") for x in self.nodes], dtype=object)
        self.gpu_node = _gpu_nodes(graph, index)
        self.num_gpus = len(self.gpu_node)
        self._build_domains(kinds)
        self._build_network(kinds)

    def lookup(self, u: np.ndarray, v: np.ndarray) -> np.ndarray:
        """Link ids of directed links u -> v (node indices); -1 where there is no such link.

        Examples
        --------
        >>> import networkx as nx
        >>> g = nx.Graph(); g.add_node("gpu0", kind="gpu"); g.add_edge("gpu0", "s", capacity_gbps=1.0)
        >>> RouteTables(g, link_table(g)).lookup(np.array([0, 1, 0]), np.array([1, 0, 0])).tolist()
        [0, 1, -1]
        """
        keys = np.asarray(u, dtype=np.int64) * len(self.nodes) + np.asarray(v, dtype=np.int64)
        pos = np.searchsorted(self._sorted_keys, keys)
        pos = np.minimum(pos, len(self._sorted_keys) - 1)
        found = self._sorted_keys[pos] == keys if len(self._sorted_keys) else np.zeros(len(keys), bool)
        return np.where(found, self._key_order[pos], -1)

    def _build_domains(self, kinds: np.ndarray) -> None:
        """NVLink domains: components of the GPU/NVSwitch subgraph over GPU/NVSwitch-only edges."""
        nv = kinds[self.lsrc].astype(str)
        is_nv = np.isin(nv, list(NVLINK_NODE_KINDS)) & np.isin(kinds[self.ldst].astype(str), list(NVLINK_NODE_KINDS))
        self.nvlink_graph = nx.Graph()
        self.nvlink_graph.add_nodes_from(int(x) for x in self.gpu_node)
        self.nvlink_graph.add_edges_from(zip(self.lsrc[is_nv].tolist(), self.ldst[is_nv].tolist(), strict=True))
        comp_of = {}
        for cid, comp in enumerate(nx.connected_components(self.nvlink_graph)):
            for x in comp:
                comp_of[x] = cid
        self.domain = np.array([comp_of[int(x)] for x in self.gpu_node], dtype=np.int64)
        # Star domains (each GPU on exactly one NVSwitch, no GPU-GPU NVLink): vectorised intra paths.
        nvs = np.full(self.num_gpus, -1, dtype=np.int64)
        for slot, node in enumerate(self.gpu_node.tolist()):
            nbrs = list(self.nvlink_graph.neighbors(node))
            if len(nbrs) == 1 and kinds[nbrs[0]] == "nvswitch":
                nvs[slot] = nbrs[0]
        self.nvs_of = nvs
        has = nvs >= 0
        self.up = np.where(has, self.lookup(self.gpu_node, np.where(has, nvs, 0)), -1)
        self.down = np.where(has, self.lookup(np.where(has, nvs, 0), self.gpu_node), -1)
        order = np.argsort(self.domain, kind="stable")
        sizes = np.bincount(self.domain)
        width = int(sizes.max())
        members = np.full((len(sizes), width), -1, dtype=np.int64)
        start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        col = np.arange(self.num_gpus) - np.repeat(start, sizes)
        members[self.domain[order], col] = order
        self.members = members

    def _build_network(self, kinds: np.ndarray) -> None:
        """Switch graph, per-GPU access switches, distances to every target, next-hop tables."""
        n = len(self.nodes)
        is_sw = np.isin(kinds.astype(str), list(SWITCH_KINDS))
        sw_nodes = np.nonzero(is_sw)[0]
        self.S = S = len(sw_nodes)
        self.sw_node = sw_nodes
        sw_of = np.full(n + 1, S, dtype=np.int64)  # S = "no switch"
        sw_of[sw_nodes] = np.arange(S)
        self.sw_of = sw_of
        # access links: GPU -> switch
        gpu_mask = np.zeros(n, dtype=bool)
        gpu_mask[self.gpu_node] = True
        slot_of = np.full(n, -1, dtype=np.int64)
        slot_of[self.gpu_node] = np.arange(self.num_gpus)
        acc = gpu_mask[self.lsrc] & is_sw[self.ldst]
        acc_slot, acc_sw, acc_lid = slot_of[self.lsrc[acc]], sw_of[self.ldst[acc]], np.nonzero(acc)[0]
        order = np.lexsort((acc_sw, acc_slot))
        acc_slot, acc_sw, acc_lid = acc_slot[order], acc_sw[order], acc_lid[order]
        per = np.bincount(acc_slot, minlength=self.num_gpus)
        width = max(1, int(per.max()) if len(per) else 1)
        col = np.arange(len(acc_slot)) - np.repeat(np.concatenate([[0], np.cumsum(per)[:-1]]), per)
        self.acc_sw = np.full((self.num_gpus, width), S, dtype=np.int64)
        self.acc_lid = np.full((self.num_gpus, width), -1, dtype=np.int64)
        self.acc_sw[acc_slot, col] = acc_sw
        self.acc_lid[acc_slot, col] = acc_lid
        # targets: distinct access-switch sets (GPUs without any access link get target T = "none")
        sets, target_of = np.unique(self.acc_sw, axis=0, return_inverse=True)
        target_of = target_of.reshape(-1)
        real = ~(sets == S).all(axis=1)
        remap = np.full(len(sets), -1, dtype=np.int64)
        remap[real] = np.arange(int(real.sum()))
        sets = sets[real]
        self.T = T = len(sets)
        remap[~real] = T
        self.target_of = remap[target_of]
        # distances: BFS from every access switch over switch-switch links
        net = is_sw[self.lsrc] & is_sw[self.ldst]
        self._sl_src, self._sl_dst, self._sl_id = sw_of[self.lsrc[net]], sw_of[self.ldst[net]], np.nonzero(net)[0]
        order = np.argsort(self._sl_src, kind="stable")
        self._sl_src, self._sl_dst, self._sl_id = self._sl_src[order], self._sl_dst[order], self._sl_id[order]
        dt = np.full((T + 1, S + 1), INF, dtype=np.int32)
        if T and S:
            sources = np.unique(sets[sets < S])
            dist = bfs_hops(self._sl_src, self._sl_dst, S, sources)
            dist = np.where(dist < INF, dist + 1, INF).astype(np.int32)
            row_of = np.full(S + 1, len(sources), dtype=np.int64)
            row_of[sources] = np.arange(len(sources))
            dist = np.vstack([dist, np.full((1, S), INF, dtype=np.int32)])
            dt[:T, :S] = dist[row_of[sets]].min(axis=1)
        self.dt = dt
        # TT[a, b]: network hops from a GPU of target a to a GPU of target b, minus one (the access hop)
        tt = np.full((T + 1, T + 1), INF, dtype=np.int32)
        if T:
            tt[:T, :] = dt.T[sets].min(axis=1)
        self.tt = tt
        self._build_next_hops()

    def _build_next_hops(self) -> None:
        """CSR ``(target, switch) -> links one hop closer to the target``."""
        T, S = self.T, self.S
        dt = self.dt
        counts = np.zeros(T * S, dtype=np.int64)
        lids = []
        n_links = max(1, len(self._sl_src))
        chunk = max(1, (1 << 23) // n_links)
        for t0 in range(0, T, chunk):
            block = dt[t0:t0 + chunk, :S]
            dx, dy = block[:, self._sl_src], block[:, self._sl_dst]
            rows, cols = np.nonzero((dy == dx - 1) & (dx < INF))
            keys = (rows + t0) * S + self._sl_src[cols]
            counts += np.bincount(keys, minlength=T * S)
            lids.append(self._sl_id[cols])
        self.nh_cnt = counts
        self.nh_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        self.nh_lid = np.concatenate(lids) if lids else np.zeros(0, dtype=np.int64)

    @cached_property
    def num_paths(self) -> np.ndarray:
        """Equal-cost paths from switch x to the GPUs of target t, flat ``t * S + x`` (float: exact to 2**53)."""
        T, S = self.T, self.S
        dt = self.dt[:T, :S].reshape(-1)
        paths = (dt == 1).astype(np.float64)
        keys = np.repeat(np.arange(T * S), self.nh_cnt)
        nxt = (keys // S) * S + self.sw_of[self.ldst[self.nh_lid]]
        level = dt[keys]
        for d in range(2, int(level.max(initial=1)) + 1):
            m = level == d
            paths += np.bincount(keys[m], weights=paths[nxt[m]], minlength=T * S)
        return paths

    @cached_property
    def nh_cum(self) -> np.ndarray:
        """Running total, over the whole next-hop table, of the paths behind each next hop (non-decreasing)."""
        S = self.S
        target = np.repeat(np.arange(self.T * S) // max(S, 1), self.nh_cnt)
        return np.cumsum(self.num_paths[target * S + self.sw_of[self.ldst[self.nh_lid]]])

    @cached_property
    def leaf_rank(self) -> np.ndarray:
        """Each GPU's index in leaf order: sorted by its first access switch, then by slot (int64).

        The destination index of ``dmodk`` routing (:func:`topologies.route_walk.network_paths`): OpenSM's
        fat-tree routing numbers the hosts leaf switch by leaf switch, so GPUs under one leaf get consecutive
        indices (on ``fat_tree`` this is the slot itself; on rail fabrics the servers of one rail).

        Examples
        --------
        >>> from topologies import fat_tree
        >>> g = fat_tree(4, gpus_per_server=2)
        >>> bool((RouteTables(g, link_table(g)).leaf_rank == np.arange(16)).all())
        True
        """
        order = np.lexsort((np.arange(self.num_gpus), self.acc_sw[:, 0]))
        rank = np.empty(self.num_gpus, dtype=np.int64)
        rank[order] = np.arange(self.num_gpus)
        return rank

    @cached_property
    def all_direct(self) -> bool:
        """Every GPU reaches every other GPU's access switches through the network (no relays needed)."""
        t = self.target_of
        return bool((t < self.T).all()) and bool((self.tt[:self.T, :self.T] < INF).all())

    @cached_property
    def acc_down(self) -> np.ndarray:
        """Link from each GPU's access switch ``acc_sw[g, c]`` down to GPU ``g`` (-1 where none)."""
        has = self.acc_sw < self.S
        if not has.any():  # no network switch at all (an NVLink-only graph)
            return np.full(self.acc_sw.shape, -1, dtype=np.int64)
        sw = self.sw_node[np.where(has, self.acc_sw, 0)]
        down = self.lookup(sw.reshape(-1), np.repeat(self.gpu_node, self.acc_sw.shape[1])).reshape(sw.shape)
        return np.where(has, down, -1)


def _gpu_nodes(graph: nx.Graph, index: dict) -> np.ndarray:
    """Node index of ``gpu0``, ``gpu1``, ... while they exist as GPU nodes."""
    slots = []
    for slot in range(graph.number_of_nodes()):
        name = gpu_name(slot)
        if name not in index or graph.nodes[name].get("kind") != "gpu":
            break
        slots.append(index[name])
    if not slots:
        raise TopologyError(f"{graph.graph.get('name', 'topology')}: no GPU node gpu0")
    return np.array(slots, dtype=np.int64)


def bfs_hops(edge_src: np.ndarray, edge_dst: np.ndarray, n: int, sources: np.ndarray) -> np.ndarray:
    """Hops from each source to every node over directed edges (``edge_src`` sorted), :data:`INF` if unreachable.

    A breadth-first search of all sources at once, a level at a time: the frontier's out-edges come from a
    CSR of the edges, and a node joins the next level the first time one reaches it. Sources are taken in
    blocks so the temporaries stay near 4 M entries.

    Parameters
    ----------
    edge_src, edge_dst : numpy.ndarray of int64
        Directed edges, sorted by source.
    n : int
        Number of nodes.
    sources : numpy.ndarray of int64
        Start nodes, one output row each.

    Returns
    -------
    numpy.ndarray of int32
        ``(len(sources), n)`` hops.

    Examples
    --------
    >>> bfs_hops(np.array([0, 1, 2]), np.array([1, 2, 0]), 4, np.array([0, 2])).tolist()
    [[0, 1, 2, 1048576], [1, 2, 0, 1048576]]
    """
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(edge_src, minlength=n), out=ptr[1:])
    deg = np.diff(ptr)
    out = np.full((len(sources), n), INF, dtype=np.int32)
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
            cand = cand[flat[cand] == INF]
            flat[cand] = level
            frontier = np.flatnonzero(flat == level) if len(cand) else cand
    return out


__all__ = ["INF", "RouteTables", "bfs_hops", "link_table"]
