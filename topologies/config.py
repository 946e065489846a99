"""Presets, YAML topology files and ``--set`` overrides: :func:`build` (SPEC §4, §9)."""

from __future__ import annotations

import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from topologies import hardware
from topologies.builders.fat_tree import fat_tree
from topologies.builders.leaf_spine import leaf_spine
from topologies.builders.rails import rail_only, rail_optimized
from topologies.builders.servers import check_size
from topologies.errors import TopologyError
from topologies.schema import (
    EDGE_KINDS,
    NODE_KINDS,
    NVLINK_NODE_KINDS,
    gpu_slot,
    infer_edge_kind,
    validate_graph,
)
from topologies.yamlfile import build_progress, read_yaml_file, report_progress
from traces.atomic import short_repr

#: Preset name -> builder.
PRESETS: dict[str, Callable[..., nx.Graph]] = {
    "fat_tree": fat_tree,
    "leaf_spine": leaf_spine,
    "rail_optimized": rail_optimized,
    "rail_only": rail_only,
}
_EXPLICIT_KEYS = ("name", "nodes", "links", "gpus_per_server", "description")
_TYPE_NAMES = {int: "an int", float: "a number", bool: "true or false", str: "a string"}


def preset_parameters(name: str) -> dict[str, tuple[type, Any]]:
    """Parameters of a preset: ``{name: (type, default)}`` (default ``None``: sized from ``num_gpus``).

    Examples
    --------
    >>> preset_parameters("fat_tree")["k"]
    (<class 'int'>, None)
    """
    builder = PRESETS[name]
    hints = typing.get_type_hints(builder)
    out = {}
    for pname, param in inspect.signature(builder).parameters.items():
        hint = hints[pname]
        if isinstance(hint, types.UnionType):
            hint = next(arg for arg in typing.get_args(hint) if arg is not type(None))
        out[pname] = (hint, param.default)
    return out


def check_parameters(name: str, params: Mapping[str, Any], where: str) -> dict[str, Any]:
    """Check parameter names and types against preset ``name``; ints are accepted where numbers are.

    Raises
    ------
    TopologyError
        Naming the first unknown key or the first value of the wrong type.
    """
    known = preset_parameters(name)
    out = {}
    for key, value in params.items():
        if key not in known:
            raise TopologyError(f"{where}: unknown parameter '{key}' for {name}; known: {', '.join(known)}")
        kind, default = known[key]
        if value is None and default is None:
            out[key] = None
            continue
        ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            ok, value = True, float(value)
        if not ok:
            raise TopologyError(f"{where}: parameter '{key}' of {name} must be {_TYPE_NAMES.get(kind, kind.__name__)}, "
                                f"got {short_repr(value)} ({type(value).__name__})")
        out[key] = value
    return out


def build(name_or_yaml: str | Path, **params: Any) -> nx.Graph:
    """Build and validate a topology from a preset name or a YAML file.

    Parameters
    ----------
    name_or_yaml : str or Path
        A preset (``fat_tree``, ``leaf_spine``, ``rail_optimized``, ``rail_only``) or a YAML file, either
        ``preset: NAME`` plus parameters, or explicit ``nodes:`` (``{name, kind, ...}``) and ``links:``
        (``{a, b, capacity_gbps, latency_us, kind}``, ``kind`` optional) as in SPEC §4.
    **params
        Preset parameters (override those of a YAML preset file), e.g. ``num_gpus=32`` to size the
        fabric to a trace. An explicit YAML graph takes only ``num_gpus`` (checked against its GPUs) and
        ``gpus_per_server`` (must match).

    Returns
    -------
    networkx.Graph
        Validated by :func:`topologies.schema.validate_graph`.

    Raises
    ------
    TopologyError
        Unknown preset, unreadable or malformed YAML (naming the file and field), unknown parameter or
        wrong type (naming the key), bad values, a fabric too small for ``num_gpus``.

    Examples
    --------
    >>> g = build("fat_tree", num_gpus=32, gpus_per_server=8)
    >>> g.graph["k"], g.graph["num_gpus"]
    (6, 32)
    """
    if not isinstance(name_or_yaml, str | os.PathLike):
        raise TopologyError(f"a topology is a preset name or a YAML path, got {short_repr(name_or_yaml)} "
                            f"({type(name_or_yaml).__name__})")
    if isinstance(name_or_yaml, str) and name_or_yaml in PRESETS:
        return _build_preset(name_or_yaml, {}, params, name_or_yaml)
    path = Path(name_or_yaml)
    if path.suffix.lower() in (".yaml", ".yml") or path.exists():
        return _build_yaml(path, params)
    raise TopologyError(f"unknown topology {short_repr(str(name_or_yaml))}: expected one of {', '.join(PRESETS)} "
                        "or a YAML file")


def _build_preset(name: str, file_params: Mapping[str, Any], params: Mapping[str, Any], where: str) -> nx.Graph:
    params = dict(params)
    label = params.pop("name", None)
    # gpu= / nic= hardware presets are the planner's, not the builder's (topologies.hardware)
    hw_params = {**file_params, **params}
    hw = hardware.hardware_attrs(hw_params, where)
    file_params = {k: v for k, v in file_params.items() if k not in hardware.HARDWARE_KEYS}
    params = {**hardware.default_link_rates(hw_params),
              **{k: v for k, v in params.items() if k not in hardware.HARDWARE_KEYS}}
    merged = check_parameters(name, file_params, where)
    merged.update(check_parameters(name, params, "topology parameters" if file_params else where))
    report_progress(f"building {name}", 0, None)
    graph = PRESETS[name](**merged)
    report_progress("checking the graph", 0, None)
    if label is not None:
        graph.graph["name"] = str(label)
    if hw:
        graph.graph["hardware"] = hw
    return validate_graph(graph, where)


def _build_yaml(path: Path, params: Mapping[str, Any]) -> nx.Graph:
    doc = read_yaml_file(path)  # size limit, UTF-8, safe_load with alias expansion bounded
    if not isinstance(doc, dict):
        raise TopologyError(f"{path}: expected a mapping with 'preset:' or 'nodes:' and 'links:'")
    if "preset" in doc:
        doc = dict(doc)
        name = doc.pop("preset")
        if not isinstance(name, str) or name not in PRESETS:
            raise TopologyError(f"{path}: preset: unknown preset {short_repr(name)}; known: {', '.join(PRESETS)}")
        label = doc.pop("name", path.stem)
        doc.pop("description", None)
        graph = _build_preset(name, doc, {"name": label, **params}, str(path))
        return graph
    if "nodes" not in doc or "links" not in doc:
        raise TopologyError(f"{path}: expected 'preset: NAME' or both 'nodes:' and 'links:'")
    return _explicit(path, doc, params)


def _explicit(path: Path, doc: dict, params: Mapping[str, Any]) -> nx.Graph:
    where = str(path)
    for key in doc:
        if key not in _EXPLICIT_KEYS:
            raise TopologyError(f"{where}: unknown key {short_repr(key)}; an explicit topology has "
                                f"{', '.join(_EXPLICIT_KEYS)}")
    graph = nx.Graph()
    nodes, links = doc["nodes"], doc["links"]
    if not isinstance(nodes, list) or not isinstance(links, list):
        raise TopologyError(f"{where}: 'nodes' and 'links' must be lists")
    gpus = sum(1 for item in nodes if isinstance(item, dict) and item.get("kind") == "gpu")
    check_size(where, gpus, len(nodes), len(links), "the file")  # before building anything
    for i, item in enumerate(nodes):
        if i % 4096 == 0:
            report_progress("adding nodes", i, len(nodes))
        field = f"{where}: nodes[{i}]"
        if not isinstance(item, dict) or "name" not in item or "kind" not in item:
            raise TopologyError(f"{field}: expected a mapping with 'name' and 'kind'")
        raw_name, attrs = item["name"], {k: v for k, v in item.items() if k != "name"}
        if isinstance(raw_name, bool) or not isinstance(raw_name, str | int):
            raise TopologyError(f"{field}: name must be a string, got {short_repr(raw_name)}")
        name = str(raw_name)
        if not isinstance(attrs["kind"], str) or attrs["kind"] not in NODE_KINDS:
            raise TopologyError(f"{field}: kind {short_repr(attrs['kind'])} is not one of {', '.join(NODE_KINDS)}")
        if name in graph:
            raise TopologyError(f"{field}: node {short_repr(name)} is declared twice")
        graph.add_node(name, **attrs)
    for i, item in enumerate(links):
        if i % 4096 == 0:
            report_progress("adding links", i, len(links))
        field = f"{where}: links[{i}]"
        if not isinstance(item, dict):
            raise TopologyError(f"{field}: expected a mapping {{a, b, capacity_gbps, latency_us, kind}}")
        for key in ("a", "b", "capacity_gbps", "latency_us"):
            if key not in item:
                raise TopologyError(f"{field}: missing '{key}'")
        unknown = [k for k in item if k not in ("a", "b", "capacity_gbps", "latency_us", "kind")]
        if unknown:
            raise TopologyError(f"{field}: unknown key {short_repr(unknown[0])}")
        for end in ("a", "b"):
            if isinstance(item[end], bool) or not isinstance(item[end], str | int):
                raise TopologyError(f"{field}: '{end}' must be a node name, got {short_repr(item[end])}")
        a, b = str(item["a"]), str(item["b"])
        for end in (a, b):
            if end not in graph:
                raise TopologyError(f"{field}: node {short_repr(end)} is not declared in 'nodes'")
        if a == b or graph.has_edge(a, b):
            raise TopologyError(f"{field}: {a}-{b} is a self-loop or a duplicate link")
        for key, strict in (("capacity_gbps", True), ("latency_us", False)):
            value = item[key]
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (strict and value == 0):
                raise TopologyError(f"{field}: {key} must be a number {'>' if strict else '>='} 0, "
                                    f"got {short_repr(value)}")
        kind = item.get("kind") or infer_edge_kind(graph.nodes[a]["kind"], graph.nodes[b]["kind"])
        if not isinstance(kind, str) or kind not in EDGE_KINDS:
            raise TopologyError(f"{field}: kind {short_repr(kind)} is not one of {', '.join(EDGE_KINDS)}")
        graph.add_edge(a, b, capacity_gbps=float(item["capacity_gbps"]), latency_us=float(item["latency_us"]),
                       kind=kind)
    report_progress("finding servers", 0, None)
    gps = _infer_servers(graph, where)
    declared = doc.get("gpus_per_server", gps)
    if isinstance(declared, bool) or not isinstance(declared, int) or declared < 1:
        raise TopologyError(f"{where}: gpus_per_server must be a positive int, got {short_repr(declared)}")
    gpus = sum(1 for _, d in graph.nodes(data=True) if d["kind"] == "gpu")
    graph.graph.update(name=str(doc.get("name", path.stem)), preset="yaml", num_gpus=gpus, gpus_per_server=declared)
    for key, value in params.items():
        if key == "num_gpus":
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise TopologyError(f"{where}: parameter 'num_gpus' must be a positive int, got {short_repr(value)}")
            if value > gpus:
                raise TopologyError(f"{where} holds {gpus} GPUs, fewer than num_gpus={value}")
        elif key == "gpus_per_server":
            if value != declared:
                raise TopologyError(f"{where}: parameter 'gpus_per_server'={short_repr(value)} but the file has "
                                    f"{declared}")
        elif key == "name":
            graph.graph["name"] = str(value)
        else:
            raise TopologyError(f"{where}: unknown parameter '{key}' for an explicit topology (only num_gpus, "
                                "gpus_per_server)")
    return validate_graph(graph, where)


def _infer_servers(graph: nx.Graph, where: str) -> int:
    """Give GPUs without ``server``/``local_rank`` their NVLink domain and rank in it; return the largest domain."""
    # a real graph, not a subgraph view: a view's len() walks every node (quadratic over 35k domains)
    nv = nx.Graph(graph.subgraph(n for n, d in graph.nodes(data=True) if d["kind"] in NVLINK_NODE_KINDS))
    domains = []
    for comp in nx.connected_components(nv):
        gpus = sorted((n for n in comp if graph.nodes[n]["kind"] == "gpu"), key=lambda n: (gpu_slot(n) is None,
                                                                                        gpu_slot(n) or 0, n))
        if gpus:
            domains.append((gpus, [n for n in comp if graph.nodes[n]["kind"] == "nvswitch"]))
    domains.sort(key=lambda dom: (gpu_slot(dom[0][0]) is None, gpu_slot(dom[0][0]) or 0))
    for server, (gpus, switches) in enumerate(domains):
        for local, name in enumerate(gpus):
            graph.nodes[name].setdefault("server", server)
            graph.nodes[name].setdefault("local_rank", local)
        for n in switches:
            graph.nodes[n].setdefault("server", server)
    if not domains:
        raise TopologyError(f"{where}: no GPU nodes")
    return max(len(gpus) for gpus, _ in domains)


__all__ = ["PRESETS", "build", "build_progress", "check_parameters", "preset_parameters"]
