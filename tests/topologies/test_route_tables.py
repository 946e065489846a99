"""The router's breadth-first distances (numpy, no scipy) against networkx on random directed graphs."""

from __future__ import annotations

import networkx as nx
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies.route_tables import bfs_hops

INF = 1 << 20


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 30), data=st.data())
def test_bfs_hops_equal_networkx_shortest_paths(n, data):
    edges = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=4 * n))
    edges = sorted(set((u, v) for u, v in edges if u != v))
    sources = np.array(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n)), dtype=np.int64)
    src = np.array([u for u, _ in edges], dtype=np.int64)
    dst = np.array([v for _, v in edges], dtype=np.int64)
    got = bfs_hops(src, dst, n, sources)
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    for row, s in enumerate(sources.tolist()):
        lengths = nx.single_source_shortest_path_length(g, s)
        want = [lengths.get(x, INF) for x in range(n)]
        assert got[row].tolist() == want
