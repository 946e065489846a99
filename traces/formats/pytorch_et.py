"""PyTorch Execution Trace (ET) JSON -> §3 rows: its ``record_param_comms`` nodes.

Two node layouts are read:

- schema 1.0.x (flat): ``inputs`` is the list of values, ``input_types`` their types; a node's call is
  ``(tensors, seq, pg, rank, collective_name, in_split, out_split[, rank_start, rank_stride, size])``.
  Before 1.0.3, ``pg`` is a pointer of the rank's process group (so not comparable across ranks).
- schema ≥ 1.1 (Chakra-style): ``inputs = {values, shapes, types}`` and ``attrs`` carrying
  ``collective_name, dtype, in_msg_nelems, out_msg_nelems, in_split_size, out_split_size,
  global_rank_start, global_rank_stride, pg_name, pg_desc, pg_size``.

A tensor value is ``[tensor_id, storage_id, offset, numel, elem_bytes, device]``. The ``rank`` argument is
the root for Broadcast/Reduce/Gather/Scatter and the peer for Send/Recv (as PyTorch records it), the
caller's group rank otherwise. Process-group members come from the ``process_group:init`` node when
present (its JSON list of ``{pg_name, ranks, group_size}``; empty ``ranks`` means the whole world), else
from ``global_rank_start/stride`` and ``pg_size``. ET nodes carry no timestamps: ``t_start_s`` and
``duration_s`` are NaN and ``seq`` follows node order.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from traces.formats.common import (
    Ignored,
    RowSink,
    as_int,
    parse_int_list,
    split_bytes_of,
    torch_count,
    torch_dtype,
    torch_op,
)
from traces.ingest_report import IngestReport
from traces.schema import DTYPE_BYTES, P2P_OPS, ROOTED_OPS, TraceError

_TENSOR_TYPE = re.compile(r"Tensor\(([^)]*)\)")
_DEVICE = re.compile(r"cuda:(\d+)")
_DIGITS = re.compile(r"(\d+)")


def looks_like_et(head: str) -> bool:
    """True for a PyTorch Execution Trace: a JSON object with ``schema`` and ``nodes`` keys.

    Examples
    --------
    >>> looks_like_et('{"schema": "1.0.1", "pid": 7, "nodes": [')
    True
    """
    text = head.lstrip()
    return text.startswith("{") and '"nodes"' in text and '"schema"' in text and '"traceEvents"' not in text


class _Node:
    """One ET node in a layout-independent form."""

    def __init__(self, node: dict[str, Any]) -> None:
        self.id = as_int(node.get("id")) or 0
        self.name = str(node.get("name", ""))
        inputs, outputs = node.get("inputs"), node.get("outputs")
        if isinstance(inputs, dict):  # schema >= 1.1
            self.values = list(inputs.get("values") or [])
            self.types = [str(t) for t in inputs.get("types") or []]
            self.out_values = list((outputs or {}).get("values") or [])
            self.out_types = [str(t) for t in (outputs or {}).get("types") or []]
        else:
            self.values = list(inputs or [])
            self.types = [str(t) for t in node.get("input_types") or []]
            self.out_values = list(outputs or [])
            self.out_types = [str(t) for t in node.get("output_types") or []]
        self.attrs = {a.get("name"): a.get("value") for a in node.get("attrs") or [] if isinstance(a, dict)}


def _tensors(value: Any) -> list[list[Any]]:
    """Tensor descriptors inside a value (a tensor, or nested lists of tensors)."""
    if (isinstance(value, list) and len(value) == 6 and isinstance(value[3], int)
            and isinstance(value[5], str)):
        return [value]
    if isinstance(value, list):
        return [t for item in value for t in _tensors(item)]
    return []


def _pg_table(nodes: list[_Node], where: str) -> dict[str, list[int] | int]:
    """pg_name -> ranks (or the group size when ``ranks`` is empty, meaning all ranks)."""
    for node in nodes:
        if node.name != "process_group:init" or not node.values:
            continue
        try:
            groups = json.loads(node.values[0]) if isinstance(node.values[0], str) else node.values[0]
        except json.JSONDecodeError as exc:
            raise TraceError(f"{where}: process_group:init node {node.id} is not JSON ({exc.msg})") from None
        table: dict[str, list[int] | int] = {}
        for pg in groups if isinstance(groups, list) else []:
            if not isinstance(pg, dict):
                continue
            ranks = parse_int_list(pg.get("ranks")) or []
            table[str(pg.get("pg_name"))] = ranks or (as_int(pg.get("group_size")) or 0)
        return table
    return {}


class _Call:
    """The parts of one ``record_param_comms`` node this reader uses."""

    def __init__(self, node: _Node) -> None:
        self.node = node
        values = node.values
        # The collective name is the first string argument that is not the pg tuple; the int before
        # it is the call's rank argument.
        self.name_index = next((i for i, v in enumerate(values[:6]) if isinstance(v, str)), -1)
        self.name = str(node.attrs.get("collective_name") or (values[self.name_index] if self.name_index >= 0
                                                              else ""))
        self.call_rank = as_int(values[self.name_index - 1]) if self.name_index >= 1 else None
        self.pg_value = values[self.name_index - 2] if self.name_index >= 2 else None
        after = values[self.name_index + 1:] if self.name_index >= 0 else []
        self.in_split = parse_int_list(node.attrs.get("in_split_size", after[0] if after else None))
        self.start = as_int(node.attrs.get("global_rank_start", after[2] if len(after) > 2 else None))
        self.stride = as_int(node.attrs.get("global_rank_stride", after[3] if len(after) > 3 else None))
        self.size = as_int(node.attrs.get("pg_size", after[4] if len(after) > 4 else None))
        pg_name = node.attrs.get("pg_name")
        if pg_name is None and isinstance(self.pg_value, list) and self.pg_value:
            pg_name = self.pg_value[0]
        self.pg_name = str(pg_name) if pg_name not in (None, "") else None
        self.pg_ptr = self.pg_value if isinstance(self.pg_value, int) else None
        ins = _tensors(values[0]) if values and self.name_index > 0 else []
        outs = _tensors(node.out_values)
        self.in_nelems = as_int(node.attrs.get("in_msg_nelems"))
        if self.in_nelems is None:
            self.in_nelems = sum(int(t[3]) for t in ins)
        self.out_nelems = as_int(node.attrs.get("out_msg_nelems"))
        if self.out_nelems is None:
            self.out_nelems = sum(int(t[3]) for t in outs)
        dtype = node.attrs.get("dtype")
        if dtype is None and node.types:
            match = _TENSOR_TYPE.search(node.types[0])
            dtype = match.group(1) if match else None
        self.dtype = torch_dtype(str(dtype)) if dtype is not None else None
        device = _DEVICE.search(str(ins[0][5])) if ins else None
        self.device = int(device.group(1)) if device else -1


def read_et_file(path: Path, data: dict[str, Any], sink: RowSink, comms: dict[str, list[int]],
                 report: IngestReport, ignored: Ignored, world_hint: int) -> int | None:
    """Add one ET file's rows; return the largest group size it shows (for the world size).

    Raises
    ------
    TraceError
        When the file is not an ET or its rank cannot be told.
    """
    if not isinstance(data.get("nodes"), list):
        raise TraceError(f"{path}: not a PyTorch Execution Trace (no 'nodes' list)")
    nodes = [_Node(n) for n in data["nodes"] if isinstance(n, dict)]
    report.lines_read += len(nodes)
    pg_table = _pg_table(nodes, str(path))
    calls = [_Call(n) for n in sorted(nodes, key=lambda n: n.id) if n.name == "record_param_comms"]
    if not calls:  # a rank that made no collective call: nothing to read, and no rank to tell
        report.notes.append(f"{path.name}: no record_param_comms node (the traced process made no collective "
                            "call)")
        return None
    rank = _own_rank(path, calls)
    largest = max([c.size or 0 for c in calls] + [len(c.in_split or []) for c in calls] + [0]) or None
    ptr_comms: dict[int, str] = {}
    for call in calls:
        where = f"{path}:node {call.node.id}"
        op = torch_op(call.name)
        if op is None:
            ignored.add(call.name or "unnamed", where)
            continue
        if call.dtype is None:
            report.skip("record_param_comms without a schema dtype", where)
            continue
        comm, members = _comm_of(call, pg_table, ptr_comms, largest or world_hint)
        if members is None:
            report.skip("process group members unknown", where)
            continue
        nranks = len(members)
        if rank not in members:
            report.skip("traced rank is not a member of the collective's process group", where)
            continue
        comms.setdefault(comm, members)
        count = torch_count(op, call.in_nelems, call.out_nelems, nranks)
        split: tuple[int, ...] = ()
        if op == "AllToAll":
            split = split_bytes_of(call.in_split, call.in_nelems, nranks, DTYPE_BYTES[call.dtype])
            if split:
                count = sum(split) // DTYPE_BYTES[call.dtype] // nranks
        root, peer = -1, -1
        if op in ROOTED_OPS | P2P_OPS:
            if call.call_rank is None or not 0 <= call.call_rank < nranks:
                report.skip(f"{op} without its root/peer rank", where)
                continue
            root = call.call_rank
            peer = members[root] if op in P2P_OPS else -1
        sink.add(rank=rank, comm=comm, op=op, count=count, dtype=call.dtype, nranks=nranks, root=root,
                 device=call.device, split_bytes=split, peer=peer, order=call.node.id)
    if ptr_comms:
        report.notes.append(f"{path.name}: ET schema {data.get('schema')} names process groups by pointer; the "
                            f"k-th group of each rank is taken as one communicator of {largest or world_hint} "
                            "ranks (0..n-1)")
    return largest


def _own_rank(path: Path, calls: list[_Call]) -> int:
    """The traced process's global rank: from calls whose rank argument is the caller's own rank
    (not rooted, not p2p), mapped through the group's start/stride; else from the file name."""
    votes: Counter[int] = Counter()
    for call in calls:
        op = torch_op(call.name)
        if call.call_rank is None or call.call_rank < 0 or op in ROOTED_OPS | P2P_OPS:
            continue
        if call.start is not None and call.stride is not None and call.start >= 0 and call.stride > 0:
            votes[call.start + call.stride * call.call_rank] += 1
        elif call.pg_name in (None, "0") or call.pg_ptr is not None:
            votes[call.call_rank] += 1  # the default group: group rank == global rank
    if votes:
        return votes.most_common(1)[0][0]
    digits = _DIGITS.findall(path.stem)
    if digits:
        return int(digits[-1])
    raise TraceError(f"{path}: cannot tell the rank of this execution trace (no rank in its calls or name)")


def _comm_of(call: _Call, pg_table: dict[str, list[int] | int], ptr_comms: dict[int, str],
             world: int) -> tuple[str, list[int] | None]:
    if call.pg_name is not None:
        known = pg_table.get(call.pg_name)
        if isinstance(known, list) and known:
            return f"pg:{call.pg_name}", known
        size = call.size or (known if isinstance(known, int) and known else None)
        if size and call.start is not None and call.stride is not None and call.start >= 0 and call.stride > 0:
            return f"pg:{call.pg_name}", [call.start + call.stride * i for i in range(size)]
        if isinstance(known, int) and known:
            return f"pg:{call.pg_name}", list(range(known))
        return f"pg:{call.pg_name}", None
    if call.pg_ptr is not None:
        # Pointers differ between ranks: the k-th group a rank uses is taken to be the k-th of every rank.
        comm = ptr_comms.setdefault(call.pg_ptr, f"pg#{len(ptr_comms)}")
        return comm, list(range(world)) if world else None
    return "pg:?", None


__all__ = ["looks_like_et", "read_et_file"]
