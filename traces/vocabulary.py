"""The trace schema's vocabulary (SPEC §3): op names, dtype names and sizes, NCCL's dtype codes.

A leaf module (no project imports), so that :mod:`traces.schema` and the checks it runs
(:mod:`traces.checks`) can both build on it without importing each other in a circle.
"""

from __future__ import annotations

__all__ = ["COLLECTIVE_OPS", "DTYPE_BYTES", "METADATA_KEY", "NCCL_DTYPE_CODES", "NCCL_DTYPE_VALUES", "OPS",
           "P2P_OPS", "ROOTED_OPS", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1
METADATA_KEY = "collsim"

#: Operation names, as NCCL prints them (NCCL's own ``AlltoAll`` is normalised to ``AllToAll``).
OPS: tuple[str, ...] = (
    "AllReduce",
    "AllGather",
    "ReduceScatter",
    "Broadcast",
    "Reduce",
    "AllToAll",
    "Send",
    "Recv",
    "Gather",
    "Scatter",
)
COLLECTIVE_OPS: frozenset[str] = frozenset(OPS) - {"Send", "Recv"}
P2P_OPS: frozenset[str] = frozenset({"Send", "Recv"})
ROOTED_OPS: frozenset[str] = frozenset({"Broadcast", "Reduce", "Gather", "Scatter"})

#: Element size in bytes of each dtype name (NCCL's ``ncclTypeSize``).
DTYPE_BYTES: dict[str, int] = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "fp16": 2,
    "fp32": 4,
    "fp64": 8,
    "bf16": 2,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
}

#: NCCL ``ncclDataType_t`` value -> dtype name (nccl.h).
NCCL_DTYPE_CODES: dict[int, str] = {
    0: "int8",
    1: "uint8",
    2: "int32",
    3: "uint32",
    4: "int64",
    5: "uint64",
    6: "fp16",
    7: "fp32",
    8: "fp64",
    9: "bf16",
    10: "fp8_e4m3",
    11: "fp8_e5m2",
}
NCCL_DTYPE_VALUES: dict[str, int] = {name: code for code, name in NCCL_DTYPE_CODES.items()}
