"""Hardware presets: what NCCL's own tables say a GPU generation and a network transport achieve.

A topology carries ``graph.graph["hardware"]`` (set by ``topologies.build(..., gpu=NAME, nic=NAME)``);
the planner (``sim.planning``) reads it to charge each protocol's cost and the per-step latency of the
transport. Nothing here is fitted to a measurement table: every figure comes from NCCL's source or a
net plugin's source, named beside it.

GPU presets (``gpu=``)
    ``nvlink_gbps``: NVLink line rate per GPU and direction (Gb/s), the physical links;
    ``nccl_nvlink_gbps``: what NCCL's topology search credits (``src/graph/topo.h``: ``SM80_NVLINK_BW``
    20.0, ``SM90_NVLINK_BW`` 20.6, ``SM100_NVLINK_BW`` 40.1 GB/s per link, times the links: 12 on A100, 18
    on H100/H200/B200). Their ratio is the Simple protocol's efficiency on NVLink ("with the protocol
    overhead (~20%) NCCL can get an effective NVLink bandwidth of 370GB/s", NVIDIA/nccl-tests#212);
    ``arch``: the tuner's compute-capability index (ampere, hopper, blackwell); hopper and blackwell
    also have NVLink SHARP, so the planner enables NVLS / NVLSTree on their NVSwitch servers (NCCL's
    NVLS search needs compute capability 9.0; no preset counts as hopper).
NIC presets (``nic=``)
    ``efficiency``: payload share of the NIC's line rate NCCL reaches ("for NDR @ 400Gbps you should see
    46-48GB/s per NIC", NVIDIA/nccl-tests#290: 47/50); ``net_latency_us``: the latency the net plugin
    reports to NCCL's tuner (``ncclNetProperties.latency``; NCCL adds it to every inter-node step, twice
    for Simple: ``src/graph/tuning.cc``): 0 for NCCL's own IB/RoCE and socket transports, 75 us for
    aws-ofi-nccl on EFA (its P5 default, ``platform_data_map`` in ``src/platform-aws.cpp``: a bias that
    "NCCL's internal tuner choices work better with", not the wire); ``net_phys_latency_us`` /
    ``net_phys_simple_extra_us``: the physical latency plans pay per network step where it differs from
    the reported one (EFA: the plugin's own model, ``src/tuner/nccl_ofi_model.cpp`` ``net_lat`` 20 us
    for an 8 B RDMA write with immediate between two P5s, + ``TUNER_NET_COMP_OVERHEAD`` 3 us for a
    Simple completion, ``include/nccl_ofi_param.h``; aws-ofi-nccl master of 2026-08); ``protos``:
    protocols the transport allows (aws-ofi-nccl forces Simple only where the endpoint cannot deliver
    128-byte aligned writes in order; P5's default RDMA protocol can, so LL and LL128 stay);
    ``net_tuner``: the net plugin's tuner (``aws-ofi``: its region tuner, which beyond two servers
    overrides NCCL's choice, ``src/tuner/nccl_ofi_regions.cpp``; on two servers or fewer it falls back
    to NCCL's own); ``nccl_env``: the NCCL environment the net plugin exports on that platform unless the
    run sets it (aws-ofi-nccl on P5/P5e: ``NCCL_BUFFSIZE=8388608``, ``platform_data_map`` in
    ``src/platform-aws.cpp``, inserted without overwriting; the same map's ``NCCL_NVLS_CHUNKSIZE`` /
    ``NCCL_NVLSTREE_MAX_CHUNKSIZE`` of 512 KiB are not modelled).
    ``efa_p4d``: the plugin's P4d / P4de entry (``platform_data_map``: ``default_protocol = SENDRECV``,
    ``latency = 75.0`` since 1.7.0, 150 us before; ``NCCL_BUFFSIZE=8388608``): two-sided ``fi_tsend`` /
    ``fi_trecv`` (``nccl_net_ofi_sendrecv_send_comm::send`` / ``recv_comm::recv``, ``src/nccl_ofi_sendrecv.cpp``;
    eager / rendezvous and the bounce-buffer copy are libfabric's EFA provider's, not the plugin's).
    ``protos`` Simple: ``PlatformAWS::config_endpoint`` (``src/platform-aws.cpp``) sets ``NCCL_PROTO=simple``
    when ``FI_OPT_EFA_SENDRECV_IN_ORDER_ALIGNED_128_BYTES`` cannot be set, which first-generation EFA
    refuses (a p4d.24xlarge log, aws/aws-ofi-nccl#889; 1.5.0aws - 1.6 forced it for p4d / p4de by name,
    ``force_proto_simple``). Per step it keeps the only physical EFA figure the plugin publishes (P5's 20 us;
    none is published for P4d) and adds, for Simple, the GDR flush that NCCL runs on Ampere and earlier
    (``ncclTopoNeedFlush``, ``src/graph/paths.cc``; the plugin's ``recv_comm::flush`` is an ``fi_read``),
    charged as NCCL's tuner charges it, one more network latency (``tuning.cc``: "Also add the flush extra
    latency"), + the 3 us completion; Hopper needs no flush, hence ``efa``'s 3 us alone. The plugin's tuner
    covers P5 and later only (``is_model_supported`` / ``is_region_supported``), so no ``net_tuner``.
NCCL environment (``nccl_algo=``, ``nccl_proto=``, ``nvls=``, ``nccl_max_nchannels=``, ``nccl_version=``,
``nccl_buffsize=``)
    What a platform's NCCL profile sets, as a fabric attribute: ``NCCL_ALGO`` / ``NCCL_PROTO`` lists
    (NCCL's syntax, checked by ``sim.planning``), ``NCCL_NVLS_ENABLE`` (``nvls=off``: GCP's TCPX / TCPXO
    profiles set ``NCCL_NVLS_ENABLE=0``) and ``NCCL_MAX_NCHANNELS`` (GCP's A3 High profile runs
    ``NCCL_MIN_NCHANNELS=NCCL_MAX_NCHANNELS=8``; a ring then has that many channels of the per-channel
    bandwidth NCCL's topology search gives it, ``sim.planning.machine``). ``nccl_version`` (the run's
    library, e.g. ``2.29.2`` or nccl-tests' ``22902``; kept as ``2.MINOR``) selects the tuner constants that
    changed after 2.23 (``sim.planning.tuning``; unset: 2.23's, which collsim's tables are) and the p2p
    channels per network peer, which differ between 2.19, 2.20 - 2.28 and 2.29 (``sim.planning.p2p``;
    unset: NCCL's current release). ``nccl_buffsize`` (``NCCL_BUFFSIZE`` in bytes, 65536 .. 2^30; NCCL's
    default 4 MiB, ``src/init.cc``) sizes the Simple FIFO: a step is an eighth of it and trees, chains and
    PAT pipeline in steps (``enqueue.cc``), so a larger buffer means larger chunks and a longer pipeline
    fill (GCP's TCPXO profile, ``nccl-env-profile.sh``, sets 8 MiB). They need no GPU or NIC preset.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from topologies.errors import TopologyError

__all__ = ["GPU_PRESETS", "HARDWARE_KEYS", "NCCL_ENV_KEYS", "NIC_PRESETS", "PRESET_KEYS", "default_link_rates",
           "gpu_preset_for", "hardware_attrs", "preset_help", "without_presets"]

#: gpu= presets. Rates in Gb/s per GPU and direction.
GPU_PRESETS: dict[str, dict[str, Any]] = {
    "a100": {"nvlink_gbps": 2400.0, "nccl_nvlink_gbps": 12 * 20.0 * 8, "arch": "ampere",
             "about": "A100 SXM, NVLink3 12 x 25 GB/s; NCCL credits 12 x 20.0 GB/s"},
    "h100": {"nvlink_gbps": 3600.0, "nccl_nvlink_gbps": 18 * 20.6 * 8, "arch": "hopper",
             "about": "H100 SXM, NVLink4 18 x 25 GB/s; NCCL credits 18 x 20.6 GB/s"},
    "h200": {"nvlink_gbps": 3600.0, "nccl_nvlink_gbps": 18 * 20.6 * 8, "arch": "hopper",
             "about": "H200 SXM, as H100"},
    "b200": {"nvlink_gbps": 7200.0, "nccl_nvlink_gbps": 18 * 40.1 * 8, "arch": "blackwell",
             "about": "B200, NVLink5 18 x 50 GB/s; NCCL credits 18 x 40.1 GB/s"},
}
#: nic= presets.
NIC_PRESETS: dict[str, dict[str, Any]] = {
    "ib": {"efficiency": 0.94, "net_latency_us": 0.0, "protos": None,
           "about": "InfiniBand (ConnectX, GPUDirect RDMA), NCCL's IB transport"},
    "roce": {"efficiency": 0.94, "net_latency_us": 0.0, "protos": None,
             "about": "RoCE v2 (ConnectX), NCCL's IB transport"},
    "efa": {"efficiency": 0.94, "net_latency_us": 75.0, "protos": None,
            "net_phys_latency_us": 20.0, "net_phys_simple_extra_us": 3.0, "net_tuner": "aws-ofi",
            "nccl_env": {"nccl_buffsize": 8388608},
            "about": "AWS EFA on P5/P5e via aws-ofi-nccl (RDMA protocol: LL, LL128, Simple; reports 75 us to "
                     "NCCL's tuner, pays 20 us per network step, +3 us for Simple; the plugin's region tuner "
                     "beyond two servers; its platform environment's NCCL_BUFFSIZE=8388608 unless "
                     "nccl_buffsize= is given)"},
    "efa_p4d": {"efficiency": 0.94, "net_latency_us": 75.0, "protos": ("Simple",),
                "net_phys_latency_us": 20.0, "net_phys_simple_extra_us": 20.0 + 3.0,
                "nccl_env": {"nccl_buffsize": 8388608},
                "about": "AWS EFA on P4d/P4de (A100) via aws-ofi-nccl's SENDRECV protocol: Simple only (the "
                         "endpoint cannot deliver 128-byte aligned sends in order, so the plugin sets "
                         "NCCL_PROTO=simple); reports 75 us to NCCL's tuner; pays 20 us per network step and, "
                         "for Simple, NCCL's flush (Ampere) as 20 us more + 3 us completion; no plugin tuner; "
                         "NCCL_BUFFSIZE=8388608 unless nccl_buffsize= is given"},
    "tcpxo": {"efficiency": 0.94, "net_latency_us": 0.0, "protos": ("Simple",),
              "about": "GCP GPUDirect-TCPXO (plugin reports no latency; Simple only)"},
    "socket": {"efficiency": 0.94, "net_latency_us": 0.0, "protos": None,
               "about": "NCCL's TCP socket transport"},
}
#: NCCL environment parameters (see the module docstring): name -> the NCCL variable it stands for.
NCCL_ENV_KEYS: dict[str, str] = {"nccl_algo": "NCCL_ALGO", "nccl_proto": "NCCL_PROTO", "nvls": "NCCL_NVLS_ENABLE",
                                 "nccl_max_nchannels": "NCCL_MAX_NCHANNELS", "nccl_buffsize": "NCCL_BUFFSIZE",
                                 "nccl_version": "the NCCL library's version (nccl-tests prints nccl-library=22902)"}
#: The hardware presets proper: what ``--no-presets`` (the line-rate model) drops.
PRESET_KEYS = ("gpu", "nic")
#: Topology parameters this module owns (``topologies.build`` passes them here, not to the builder): the
#: presets, the run's NCCL environment and ``nics_per_gpu`` (how many NICs NCCL sees per GPU when the
#: fabric models them as one link at their sum: 16 x 200G on 8 GPUs is 2; it sets the channel count of
#: NCCL's search across servers, ``sim.planning.tuning.net_graph_channels``).
HARDWARE_KEYS = (*PRESET_KEYS, *NCCL_ENV_KEYS, "nics_per_gpu")
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")


def _nccl_env(params: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The NCCL environment parameters, checked for type (names in lists are checked by the planner)."""
    out: dict[str, Any] = {}
    for key in ("nccl_algo", "nccl_proto"):
        value = params.get(key)
        if value is not None:
            if not isinstance(value, str) or not value.strip():
                raise TopologyError(f"{where}: parameter '{key}' must be a non-empty {NCCL_ENV_KEYS[key]} list "
                                    f"such as 'Ring,Tree'; got {value!r}")
            out[key] = value.strip()
    value = params.get("nvls")
    if value is not None:
        text = str(value).strip().lower()
        if text not in _ON + _OFF:
            raise TopologyError(f"{where}: parameter 'nvls' must be on or off (NCCL_NVLS_ENABLE); got {value!r}")
        out["nvls"] = text in _ON
    _int_param(params, "nccl_max_nchannels", 64, "NCCL_MAX_NCHANNELS", where, out)
    value = params.get("nccl_version")
    if value is not None:
        out["nccl_version"] = _nccl_version(value, where)
    _int_param(params, "nics_per_gpu", 8, "NICs NCCL sees per GPU", where, out)
    value = params.get("nccl_buffsize")
    if value is not None:  # below 64 KiB a Simple step is under 8 KiB: no platform profile sets that
        if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) \
                or not 1 << 16 <= value <= 1 << 30:
            raise TopologyError(f"{where}: parameter 'nccl_buffsize' must be an integer in 65536 .. {1 << 30} "
                                f"(NCCL_BUFFSIZE bytes); got {value!r}")
        out["nccl_buffsize"] = int(value)
    return out


def _int_param(params: Mapping[str, Any], name: str, most: int, meaning: str, where: str, out: dict) -> None:
    """``out[name]`` = the integer in 1 .. ``most`` that ``params[name]`` holds, if it is given."""
    value = params.get(name)
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value) or not 1 <= value <= most:
        raise TopologyError(f"{where}: parameter '{name}' must be an integer in 1 .. {most} ({meaning}); got {value!r}")
    out[name] = int(value)


def _nccl_version(value: Any, where: str) -> str:
    """``"2.MINOR"`` of an ``nccl_version`` parameter (``2.29.2``, ``2.29.2-1``, ``2.29`` or nccl-tests' 22902)."""
    text = str(value).strip()
    match = re.fullmatch(r"2\.(\d{1,2})(?:\.\d+)?(?:-\d+)?", text)
    if match is None and re.fullmatch(r"2\d{4}", text):  # NCCL_VERSION_CODE: 2 x 10000 + minor x 100 + patch
        match = re.fullmatch(r"2(\d{2})\d{2}", text)
    if isinstance(value, bool) or match is None:
        raise TopologyError(f"{where}: parameter 'nccl_version' must be an NCCL 2.x version such as '2.29.2' or "
                            f"22902; got {value!r}")
    return f"2.{int(match.group(1))}"


def hardware_attrs(params: Mapping[str, Any], where: str = "topology") -> dict[str, Any]:
    """The ``graph.graph["hardware"]`` entry for ``gpu=`` / ``nic=`` presets and the NCCL environment
    parameters (empty: none given).

    Raises
    ------
    TopologyError
        An unknown preset name, naming the parameter and the known names; a bad NCCL environment value.

    Examples
    --------
    >>> hw = hardware_attrs({"gpu": "H100", "nic": "ib"})
    >>> hw["gpu"], round(hw["nvlink_efficiency"], 3), hw["net_latency_us"]
    ('h100', 0.824, 0.0)
    >>> hardware_attrs({"nvls": "off", "nccl_max_nchannels": 8})
    {'nvls': False, 'nccl_max_nchannels': 8}
    >>> hardware_attrs({"nccl_version": "2.29.2"}), hardware_attrs({"nccl_version": 22305})
    ({'nccl_version': '2.29'}, {'nccl_version': '2.23'})
    """
    out: dict[str, Any] = _nccl_env(params, where)
    for key, table in (("gpu", GPU_PRESETS), ("nic", NIC_PRESETS)):
        value = params.get(key)
        if value is None:
            continue
        name = str(value).strip().lower()
        if name not in table:
            raise TopologyError(f"{where}: parameter '{key}' must be one of: {', '.join(table)}; got {value!r}")
        out[key] = name
        entry = table[name]
        if key == "gpu":
            out.update(arch=entry["arch"], nccl_nvlink_gbps=float(entry["nccl_nvlink_gbps"]),
                       nvlink_efficiency=float(entry["nccl_nvlink_gbps"]) / float(entry["nvlink_gbps"]))
        else:
            out.update(nic_efficiency=float(entry["efficiency"]), net_latency_us=float(entry["net_latency_us"]),
                       protos=list(entry["protos"]) if entry["protos"] else None)
            for extra in ("net_phys_latency_us", "net_phys_simple_extra_us"):
                if extra in entry:
                    out[extra] = float(entry[extra])
            if entry.get("net_tuner"):
                out["net_tuner"] = str(entry["net_tuner"])
            for env_key, env_value in entry.get("nccl_env", {}).items():
                out.setdefault(env_key, env_value)  # the plugin's platform environment: the run's own value wins
    return out


def without_presets(params: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters without the ``gpu=`` / ``nic=`` presets: the line-rate model of the same run.

    The NCCL environment (``nccl_algo``, ``nccl_proto``, ``nvls``, ``nccl_max_nchannels``) stays: it is what
    the run exported, not a property of the hardware model.

    Examples
    --------
    >>> without_presets({"gpu": "h100", "nic": "tcpxo", "link_gbps": 200, "nccl_proto": "Simple", "nvls": "off"})
    {'link_gbps': 200, 'nccl_proto': 'Simple', 'nvls': 'off'}
    """
    return {k: v for k, v in params.items() if k not in PRESET_KEYS}


def default_link_rates(params: Mapping[str, Any]) -> dict[str, float]:
    """``nvlink_gbps`` of the ``gpu=`` preset when the parameters do not set it."""
    gpu = params.get("gpu")
    if gpu is None or "nvlink_gbps" in params:
        return {}
    entry = GPU_PRESETS.get(str(gpu).strip().lower())
    return {"nvlink_gbps": entry["nvlink_gbps"]} if entry else {}


def gpu_preset_for(name: str) -> str | None:
    """The ``gpu=`` preset a device name printed by CUDA (nccl-tests' ``# Rank`` lines) belongs to, if any.

    Only SXM / NVSwitch parts match: a PCIe or NVL card has other NVLink rates than the preset's.

    Parameters
    ----------
    name : str
        The device name as printed, e.g. ``"NVIDIA H100 80GB HBM3"``.

    Returns
    -------
    str or None
        A key of :data:`GPU_PRESETS`, or ``None`` when no preset describes the part.

    Examples
    --------
    >>> gpu_preset_for("NVIDIA H100 80GB HBM3"), gpu_preset_for("NVIDIA A100-SXM4-40GB")
    ('h100', 'a100')
    >>> gpu_preset_for("NVIDIA H100 PCIe") is None, gpu_preset_for("NVIDIA H800") is None
    (True, True)
    """
    words = re.split(r"[\s\-_]+", str(name).lower())
    if any(w in ("pcie", "nvl") for w in words):
        return None
    return next((k for k in GPU_PRESETS if k in words), None)


def preset_help() -> str:
    """A plain-text table of the presets (for ``--help``)."""
    lines = ["gpu=  " + "; ".join(f"{k}: {v['about']}" for k, v in GPU_PRESETS.items()),
             "nic=  " + "; ".join(f"{k}: {v['about']}" for k, v in NIC_PRESETS.items()),
             "NCCL environment  nccl_algo= (NCCL_ALGO), nccl_proto= (NCCL_PROTO), nvls=on|off (NCCL_NVLS_ENABLE), "
             "nccl_max_nchannels= (NCCL_MAX_NCHANNELS: ring channels at the per-channel bandwidth of NCCL's "
             "topology search), nccl_version= (the library's, e.g. 2.29.2: its tuner's NVLS / NVLSTree / PAT constants, "
             "default 2.23's; its p2p channels per network peer, default the current release's), nccl_buffsize= "
             "(NCCL_BUFFSIZE bytes, 65536 .. 2^30, default 4194304: the Simple step of trees, chains and PAT is "
             "an eighth of it); nics_per_gpu= (NICs "
             "NCCL sees per GPU, each at link_gbps / nics_per_gpu)",
             "Without presets links run at line rate with NCCL's H100 latencies (no protocol efficiency)."]
    return "\n\n".join(lines)
