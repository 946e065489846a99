"""The per-port ideal: a non-blocking fabric where only GPU ports (NVLink and network) can bottleneck.

This is the fabric of :func:`topologies.nonblocking` (GPUs, NVSwitches and NVLinks kept, every network
port on one crossbar) without routing anything: a transfer inside an NVLink domain uses the sender's and
the receiver's NVLink ports, any other transfer their network ports; its path latency is the two ports'
latencies (GPU -> NVSwitch -> GPU, GPU -> crossbar -> GPU).
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from topologies.schema import gpu_name

__all__ = ["PortModel"]


class PortModel:
    """Per-GPU port capacities and latencies of a SPEC §4 graph.

    Parameters
    ----------
    graph : networkx.Graph
    gpus : int
        GPU slots ``gpu0 .. gpu{gpus-1}``.

    Examples
    --------
    >>> from topologies import fat_tree
    >>> pm = PortModel(fat_tree(4, gpus_per_server=2), 4)
    >>> bool(pm.intra(np.array([0]), np.array([1]))[0]), bool(pm.intra(np.array([0]), np.array([2]))[0])
    (True, False)
    """

    def __init__(self, graph: nx.Graph, gpus: int) -> None:
        self.gpus = gpus
        nvl_cap, nvl_lat = np.zeros(gpus), np.zeros(gpus)
        net_cap, net_lat = np.zeros(gpus), np.zeros(gpus)
        server = np.arange(gpus)
        for g in range(gpus):
            node = gpu_name(g)
            server[g] = int(graph.nodes[node].get("server", g))
            for _, _, d in graph.edges(node, data=True):
                cap, lat = float(d["capacity_gbps"]) * 1e9 / 8, float(d.get("latency_us", 0.0)) * 1e-6
                if d.get("kind") == "nvlink":
                    nvl_cap[g] += cap
                    nvl_lat[g] = max(nvl_lat[g], lat)
                else:
                    net_cap[g] += cap
                    net_lat[g] = max(net_lat[g], lat)
        self.server = server
        # ports: 0..gpus-1 NVLink out, gpus.. NVLink in, then network out, network in
        self.capacity_bytes_per_s = np.concatenate([nvl_cap, nvl_cap, net_cap, net_cap])
        self.nvl_lat, self.net_lat = nvl_lat, net_lat
        self.has_nvlink = nvl_cap > 0

    def intra(self, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
        """True where a transfer stays inside one NVLink domain."""
        return (self.server[src] == self.server[dst]) & self.has_nvlink[src] & self.has_nvlink[dst]

    def loads(self, src: np.ndarray, dst: np.ndarray, nbytes: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bytes per port, and each transfer's seconds per byte (its slower port) and path latency."""
        g = self.gpus
        intra = self.intra(src, dst)
        out_port = np.where(intra, src, 2 * g + src)
        in_port = np.where(intra, g + dst, 3 * g + dst)
        load = np.bincount(out_port, weights=nbytes, minlength=4 * g) + \
            np.bincount(in_port, weights=nbytes, minlength=4 * g)
        cap = self.capacity_bytes_per_s
        with np.errstate(divide="ignore"):
            spb = 1.0 / np.minimum(cap[out_port], cap[in_port])
        lat = np.where(intra, self.nvl_lat[src] + self.nvl_lat[dst], self.net_lat[src] + self.net_lat[dst])
        return load, spb, lat
