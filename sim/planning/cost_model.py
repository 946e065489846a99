"""The machine NCCL's tuner sees (:class:`CostModel`), ``NCCL_ALGO`` / ``NCCL_PROTO`` lists, and which
algorithms NCCL enables for an op on that machine.

Bandwidths are bytes per second: ``intra_bw_bytes_per_s`` is a GPU's NVLink bandwidth and
``inter_bw_bytes_per_s`` its NIC's, as NCCL's topology search credits them.
"""

from __future__ import annotations

from dataclasses import dataclass

from sim.errors import SimError
from sim.planning.nccl_tables import (
    ALGOS,
    ARCHS,
    DEFAULT_BUFF_BYTES,
    LL_MAX_BW,
    MAX_BUFF_BYTES,
    MIN_BUFF_BYTES,
    NCCL_ALGO_NAMES,
    NCCL_PROTO_NAMES,
    NVLS_MIN_LOCAL_GPUS,
    PROTOS,
)
from sim.planning.net_tuner import NET_TUNERS

__all__ = ["CostModel", "DEFAULT_MODEL", "enabled_algos", "nccl_nbytes", "parse_nccl_list", "supported_algos"]


@dataclass(frozen=True)
class CostModel:
    """The machine NCCL's tuner sees.

    Parameters
    ----------
    intra_bw_bytes_per_s : float
        Per-GPU NVLink bandwidth (one direction). Default: H100 NVLink4, 450 GB/s.
    inter_bw_bytes_per_s : float
        Per-GPU network bandwidth (one direction). Default: one 400 Gb/s NIC per GPU, 50 GB/s.
    nchannels : int
        NCCL's channel count, which scales the per-channel bandwidth caps (16 on an 8-NIC H100 node).
    cpu : str
        ``"intel"`` or ``"amd"``: NCCL's per-step network overhead (1 or 2 µs) and LL caps.
    arch : str
        GPU generation of NCCL's per-channel tables: ``volta``, ``ampere``, ``hopper`` (Blackwell has no
        row in 2.23; ``topologies.hardware`` maps b200 to hopper).
    ll128 : bool
        Whether LL128 is enabled (NCCL enables it on NVLink-connected Volta/Ampere/Hopper).
    tree_correction : bool
        Apply NCCL's empirical tree-bandwidth correction for medium sizes.
    plateau_factor : float
        Multiplier of the latency of large multi-node ring/Simple AllReduce (NCCL: 1.4 on SM80+, 1.9 on
        older GPUs; ``performance.md`` quotes the older 1.9).
    nvlink_efficiency, nic_efficiency : float
        Payload share of the NVLink / NIC line rate NCCL reaches (``topologies.hardware``; 1 = line rate).
    protocol_overhead : bool
        Charge each protocol's wire bytes in plans (LL 16 per 8 of payload, LL128 128 per 120), NVLS's
        5/6 and the efficiencies above (on with a hardware preset; off keeps the closed forms exact).
    net_latency_us : float
        Latency the net plugin reports (``ncclNetProperties.latency``), added to every inter-node step
        (twice for Simple), as NCCL's tuner does. A plugin may report a tuning bias rather than the wire
        (aws-ofi-nccl on P5: 75 us), so plans pay ``net_phys_latency_us`` where it is given.
    net_phys_latency_us : float, optional
        Physical latency of one inter-node step that plans pay on top of NCCL's per-step figure;
        ``None`` (default): the reported latency as NCCL's tuner counts it (twice for Simple).
    net_phys_simple_extra_us : float
        Extra physical latency of a Simple inter-node step (a completion handed to the host; aws-ofi-nccl's
        ``TUNER_NET_COMP_OVERHEAD``), used with ``net_phys_latency_us``.
    nics_per_gpu : int
        NICs NCCL's topology search sees per GPU, each at ``inter_bw_bytes_per_s / nics_per_gpu`` (a
        fabric models them as one link); sets the search's channels across servers.
    net_tuner : str, optional
        The net plugin's tuner that chooses before NCCL's (:mod:`sim.planning.net_tuner`): ``"aws-ofi"``
        (aws-ofi-nccl's region tuner on P5), or ``None``.
    algos, protos : tuple of str, optional
        The algorithms / protocols the tuner may pick (``NCCL_ALGO`` / ``NCCL_PROTO``); ``None`` allows
        all. See :func:`parse_nccl_list`.
    nccl_version : tuple of int
        ``(2, minor)`` of the library NCCL's tuner is modelled as: 2.23 (default) or a later one, whose
        changed constants :mod:`sim.planning.tuning` applies (``nccl_tables``, "what later versions
        changed").
    gpu_arch : str, optional
        The GPU generation as the ``gpu=`` preset names it (``ampere``, ``hopper``, ``blackwell``), for
        the tables newer than 2.23 that have a Blackwell row (the NVLSTree kernel's ceiling,
        :data:`~sim.planning.nccl_tables.NVLS_TREE_MAX_PER_CH`); ``None``: ``arch``.
    nvls : bool
        NVLink SHARP is available: every server of the communicator has an NVSwitch and the GPUs are
        sm90 or later (H100, H200, B200). Enables NVLS (one server) and NVLSTree (several).
    simple_buff_bytes : int
        ``NCCL_BUFFSIZE``: the Simple protocol's FIFO per connection (``src/init.cc``
        ``DEFAULT_BUFFSIZE`` 4 MiB). One step is an eighth of it (``NCCL_STEPS``), and a step is the
        chunk of trees and chains (``enqueue.cc``), so it sets their pipeline fill.

    Examples
    --------
    >>> CostModel(nchannels=0)
    Traceback (most recent call last):
    ...
    sim.errors.SimError: cost model: nchannels 0 must be >= 1
    """

    intra_bw_bytes_per_s: float = 450e9
    inter_bw_bytes_per_s: float = 50e9
    nchannels: int = 16
    cpu: str = "intel"
    arch: str = "hopper"
    ll128: bool = True
    tree_correction: bool = True
    plateau_factor: float = 1.4
    algos: tuple[str, ...] | None = None
    protos: tuple[str, ...] | None = None
    nvlink_efficiency: float = 1.0
    nic_efficiency: float = 1.0
    protocol_overhead: bool = False
    net_latency_us: float = 0.0
    nvls: bool = False
    net_phys_latency_us: float | None = None
    net_phys_simple_extra_us: float = 0.0
    net_tuner: str | None = None
    nics_per_gpu: int = 1
    gpu_arch: str | None = None
    nccl_version: tuple[int, int] = (2, 23)
    simple_buff_bytes: int = DEFAULT_BUFF_BYTES

    def __post_init__(self) -> None:
        if not (self.intra_bw_bytes_per_s > 0 and self.inter_bw_bytes_per_s > 0):
            raise SimError("cost model: bandwidths must be positive")
        if self.nchannels < 1:
            raise SimError(f"cost model: nchannels {self.nchannels} must be >= 1")
        if self.cpu not in LL_MAX_BW:
            raise SimError(f"cost model: cpu {self.cpu!r} is not one of: intel, amd")
        if self.arch not in ARCHS:
            raise SimError(f"cost model: arch {self.arch!r} is not one of: {', '.join(ARCHS)}")
        for name in ("nvlink_efficiency", "nic_efficiency"):
            if not 0 < getattr(self, name) <= 1:
                raise SimError(f"cost model: {name} {getattr(self, name)} must be in (0, 1]")
        version = self.nccl_version
        if not (isinstance(version, tuple) and len(version) == 2 and version[0] == 2
                and all(isinstance(v, int) and not isinstance(v, bool) for v in version) and version[1] >= 0):
            raise SimError(f"cost model: nccl_version {version!r} must be (2, minor)")
        if self.gpu_arch is not None and self.gpu_arch not in (*ARCHS, "blackwell"):
            raise SimError(f"cost model: gpu_arch {self.gpu_arch!r} is not one of: {', '.join(ARCHS)}, blackwell")
        if not isinstance(self.nvls, bool):
            raise SimError(f"cost model: nvls {self.nvls!r} must be true or false")
        for name in ("net_latency_us", "net_phys_simple_extra_us"):
            if not getattr(self, name) >= 0:
                raise SimError(f"cost model: {name} {getattr(self, name)} must be >= 0")
        if isinstance(self.nics_per_gpu, bool) or not isinstance(self.nics_per_gpu, int) or self.nics_per_gpu < 1:
            raise SimError(f"cost model: nics_per_gpu {self.nics_per_gpu!r} must be an int >= 1")
        if self.net_tuner is not None and self.net_tuner not in NET_TUNERS:
            raise SimError(f"cost model: net_tuner {self.net_tuner!r} is not one of: {', '.join(NET_TUNERS)}")
        buff = self.simple_buff_bytes
        if isinstance(buff, bool) or not isinstance(buff, int) or not MIN_BUFF_BYTES <= buff <= MAX_BUFF_BYTES:
            raise SimError(f"cost model: simple_buff_bytes {buff!r} must be an int in {MIN_BUFF_BYTES} .. "
                           f"{MAX_BUFF_BYTES} (NCCL_BUFFSIZE)")
        if self.net_phys_latency_us is not None and not self.net_phys_latency_us >= 0:
            raise SimError(f"cost model: net_phys_latency_us {self.net_phys_latency_us} must be >= 0")
        for name, allowed, known in (("algos", self.algos, ALGOS), ("protos", self.protos, PROTOS)):
            if allowed is not None and (not allowed or any(a not in known for a in allowed)):
                raise SimError(f"cost model: {name} {allowed!r} must name some of: {', '.join(known)}")

    def net_step_latency_us(self, proto: str, physical: bool = False) -> float:
        """Latency the net transport adds to one inter-node step (µs) on top of NCCL's ``hwLat``.

        ``physical=False``: what NCCL's tuner adds, the reported latency (twice for Simple: the flush,
        ``tuning.cc``); ``physical=True``: what a plan pays, ``net_phys_latency_us`` (plus the Simple
        extra) where given, else the same as the tuner.

        Examples
        --------
        >>> efa = CostModel(net_latency_us=75.0, net_phys_latency_us=20.0, net_phys_simple_extra_us=3.0)
        >>> efa.net_step_latency_us("Simple"), efa.net_step_latency_us("Simple", physical=True)
        (150.0, 23.0)
        >>> efa.net_step_latency_us("LL", physical=True)
        20.0
        """
        simple = proto == "Simple"
        if not physical or self.net_phys_latency_us is None:
            return self.net_latency_us * (2.0 if simple else 1.0)
        return self.net_phys_latency_us + (self.net_phys_simple_extra_us if simple else 0.0)

    @property
    def net_overhead_us(self) -> float:
        """NCCL's per-step network post overhead on this CPU (µs)."""
        return 1.0 if self.cpu == "intel" else 2.0


DEFAULT_MODEL = CostModel()


def parse_nccl_list(text: str | None, kind: str) -> tuple[str, ...] | None:
    """An ``NCCL_ALGO`` / ``NCCL_PROTO`` value as the tuple of allowed names (``None``: all allowed).

    Case-insensitive, comma-separated; a leading ``^`` excludes the listed names instead, as NCCL reads
    them. Algorithm names are NCCL 2.2x's (``Ring``, ``Tree``, ``NVLS``, ``NVLSTree``, ``PAT``,
    ``CollNetDirect``, ``CollNetChain``) and collsim's ``direct``.

    Parameters
    ----------
    text : str or None
        The value (``"Ring,Tree"``, ``"^LL"``); empty or ``None`` allows all.
    kind : {"algo", "proto"}

    Returns
    -------
    tuple of str or None

    Raises
    ------
    SimError
        An unknown name, or a list that allows nothing.

    Examples
    --------
    >>> parse_nccl_list("ring", "algo")
    ('ring',)
    >>> parse_nccl_list("NVLS,NVLSTree", "algo")
    ('nvls', 'nvls_tree')
    >>> parse_nccl_list("^LL", "proto")
    ('LL128', 'Simple')
    """
    if kind not in ("algo", "proto"):
        raise SimError(f"kind {kind!r} is not one of: algo, proto")
    if text is None or not str(text).strip():
        return None
    known = ALGOS if kind == "algo" else PROTOS
    table = NCCL_ALGO_NAMES if kind == "algo" else NCCL_PROTO_NAMES
    spelled = ("Ring, Tree, NVLS, NVLSTree, PAT, CollNetDirect, CollNetChain, direct" if kind == "algo"
               else "LL, LL128, Simple")
    raw = str(text).strip()
    exclude = raw.startswith("^")
    names = []
    for item in filter(None, (x.strip() for x in raw.lstrip("^").split(","))):
        name = table.get(item.lower())
        if name is None:
            raise SimError(f"NCCL_{kind.upper()} {raw!r}: {item!r} is not one of: {spelled}")
        names.append(name)
    out = tuple(k for k in known if (k in names) != exclude)
    if not out:
        raise SimError(f"NCCL_{kind.upper()} {raw!r} allows no {kind}")
    return out


def supported_algos(op: str) -> tuple[str, ...]:
    """Algorithms NCCL 2.2x has for ``op`` (and collsim plans), in NCCL's order; ``direct`` for the
    point-to-point patterns.

    Examples
    --------
    >>> supported_algos("AllReduce")
    ('ring', 'tree', 'nvls', 'nvls_tree')
    >>> supported_algos("AllGather")
    ('ring', 'nvls', 'pat')
    >>> supported_algos("AllToAll")
    ('direct',)
    """
    if op == "AllReduce":
        return ("ring", "tree", "nvls", "nvls_tree")
    if op in ("AllGather", "ReduceScatter"):
        return ("ring", "nvls", "pat")
    if op in ("Broadcast", "Reduce"):
        return ("ring",)
    if op in ("AllToAll", "Send", "Recv", "Gather", "Scatter"):
        return ("direct",)
    raise SimError(f"op {op!r} has no collective algorithm")


def enabled_algos(op: str, nranks: int, nnodes: int, model: CostModel | None = None) -> tuple[str, ...]:
    """The algorithms NCCL's tuner considers for ``op`` on this machine, after ``NCCL_ALGO``.

    NCCL's rules (``tuning.cc``, ``enqueue.cc``, ``nvls.cc``, 2.23): the tree is AllReduce's; NVLS needs
    NVLink SHARP (``model.nvls``), more than two GPUs per server and one server (several need CollNet,
    which collsim does not plan); NVLSTree is NVLS inside servers with a tree across several; PAT is
    AllGather/ReduceScatter with one GPU per server. When ``NCCL_ALGO`` leaves none of them, the ring
    stays (NCCL's ring backup).

    Examples
    --------
    >>> enabled_algos("AllReduce", 8, 1, CostModel(nvls=True))
    ('ring', 'tree', 'nvls')
    >>> enabled_algos("AllReduce", 16, 2, CostModel(nvls=True, algos=("nvls",)))
    ('ring',)
    >>> enabled_algos("AllGather", 4, 4)
    ('ring', 'pat')
    """
    model = model or DEFAULT_MODEL
    ppn = nranks / max(nnodes, 1)
    out = []
    for a in supported_algos(op):
        if a == "direct":
            return ("direct",)
        if a in ("nvls", "nvls_tree") and not (model.nvls and ppn >= NVLS_MIN_LOCAL_GPUS):
            continue
        if (a == "nvls" and nnodes > 1) or (a == "nvls_tree" and nnodes <= 1):
            continue
        if a == "pat" and not (nnodes > 1 and nnodes == nranks):
            continue
        if model.algos is not None and a not in model.algos:
            continue
        out.append(a)
    return tuple(out) or ("ring",)


def nccl_nbytes(op: str, nbytes: float, nranks: int) -> float:
    """Bytes NCCL's tuner uses for an op whose trace row says ``nbytes``.

    NCCL sizes AllGather and ReduceScatter by the whole array (per-rank bytes × ranks); every other
    op by the row's bytes.

    Examples
    --------
    >>> nccl_nbytes("AllGather", 1024, 8)
    8192
    """
    return nbytes * nranks if op in ("AllGather", "ReduceScatter") else nbytes


