"""A simple compute model that turns FLOPs and weight bytes into time, so trace timestamps show real gaps.

A kernel's time is the larger of its arithmetic time (FLOPs over the GPU's dense peak times an achieved
fraction, MFU) and its memory time (bytes read over HBM bandwidth times an achieved fraction), plus a fixed
launch overhead. Decode steps come out memory-bound (weights are re-read for a few tokens) and prefill
steps compute-bound, which is what makes serving traffic bursty.

Communication is not simulated here (the simulator does that); :func:`comm_estimate_s` only gives the
issue-time model a plausible wait so that later timestamps do not run ahead of the traffic they follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from traces.schema import TraceError
from traces.synth.models import ModelSpec


@dataclass(frozen=True)
class GpuSpec:
    """Peak figures of one GPU type (dense, no sparsity).

    Attributes
    ----------
    name : str
    bf16_tflops : float
        Dense BF16 tensor-core peak, 10^12 FLOP/s.
    fp8_tflops : float
        Dense FP8 peak (0: no FP8, BF16 is used).
    hbm_tbps : float
        HBM bandwidth, 10^12 byte/s.
    """

    name: str
    bf16_tflops: float
    fp8_tflops: float
    hbm_tbps: float


#: Vendor datasheet peaks (dense).
GPUS: dict[str, GpuSpec] = {
    "h100": GpuSpec("h100", 989.0, 1979.0, 3.35),
    "h800": GpuSpec("h800", 989.0, 1979.0, 3.35),
    "h200": GpuSpec("h200", 989.0, 1979.0, 4.8),
    "a100": GpuSpec("a100", 312.0, 0.0, 2.04),
    "b200": GpuSpec("b200", 2250.0, 4500.0, 8.0),
    "mi300x": GpuSpec("mi300x", 1307.0, 2615.0, 5.3),
}


def get_gpu(name: str) -> GpuSpec:
    """Return a GPU spec by name (case-insensitive).

    Raises
    ------
    TraceError
        For an unknown GPU; the message lists the known ones.
    """
    spec = GPUS.get(str(name).strip().lower())
    if spec is None:
        raise TraceError(f"unknown GPU type {name!r} (known: {', '.join(GPUS)})")
    return spec


@dataclass(frozen=True)
class ComputeModel:
    """Time of a kernel from its FLOPs and bytes on one GPU.

    Attributes
    ----------
    gpu : GpuSpec
    mfu : float
        Achieved fraction of the arithmetic peak.
    mem_efficiency : float
        Achieved fraction of HBM bandwidth.
    overhead_s : float
        Fixed time per call (kernel launches of one block section).
    fp8 : bool
        Matmuls run at the FP8 peak (DeepSeek-V3 inference) when the GPU has one.
    """

    gpu: GpuSpec
    mfu: float = 0.45
    mem_efficiency: float = 0.7
    overhead_s: float = 20e-6
    fp8: bool = False

    @property
    def peak_flops(self) -> float:
        """FLOP/s used for matmuls."""
        tflops = self.gpu.fp8_tflops if self.fp8 and self.gpu.fp8_tflops > 0 else self.gpu.bf16_tflops
        return tflops * 1e12

    def time_s(self, flops, bytes_read=0.0):
        """Seconds for ``flops`` arithmetic and ``bytes_read`` of memory traffic (scalars or arrays).

        Examples
        --------
        >>> m = ComputeModel(get_gpu("h100"), mfu=1.0, mem_efficiency=1.0, overhead_s=0.0)
        >>> round(m.time_s(989e12), 6)
        1.0
        """
        arith = np.asarray(flops, dtype=float) / (self.peak_flops * self.mfu)
        memory = np.asarray(bytes_read, dtype=float) / (self.gpu.hbm_tbps * 1e12 * self.mem_efficiency)
        out = np.maximum(arith, memory) + self.overhead_s
        return float(out) if out.ndim == 0 else out


def attention_flops(spec: ModelSpec, tokens: float, context_tokens: float) -> float:
    """Forward FLOPs of one attention block for ``tokens`` new tokens.

    ``context_tokens`` is the sum over the new tokens of the number of keys each attends to (a prefill of
    L tokens: about L²/2; a decode step: the sum of the sequences' lengths).
    """
    if spec.is_mla:
        qk, v = spec.qk_nope + spec.qk_rope, spec.v_head
    else:
        qk = v = spec.head_dim
    projections = 2.0 * spec.attention_params() * tokens
    scores = 2.0 * spec.heads * (qk + v) * context_tokens
    return projections + scores


def mlp_flops(spec: ModelSpec, tokens: float, inter: int | None = None) -> float:
    """Forward FLOPs of one MLP (dense, or one expert with ``inter``) over ``tokens`` tokens."""
    return 2.0 * spec.mlp_params(inter) * tokens


def comm_estimate_s(op: str, bytes_: np.ndarray, nranks: np.ndarray, offnode_bytes: np.ndarray,
                    cross_node: np.ndarray, nvlink_gbps: float = 3600.0, net_gbps: float = 400.0,
                    latency_s: float = 10e-6) -> np.ndarray:
    """Rough duration of one rank's part of a collective, for issue-time modelling only.

    Ring algorithms move ``2(n-1)/n`` of an AllReduce's bytes, ``(n-1)`` times the per-rank count of an
    AllGather/ReduceScatter; point-to-point and all-to-all move what they send. Bandwidth is NVLink inside a
    server, the NIC rate when the communicator spans servers.

    Parameters
    ----------
    op : str
        Op name (one value for the whole array).
    bytes_, nranks : numpy.ndarray
        The rows' ``bytes`` and ``nranks``.
    offnode_bytes : numpy.ndarray
        For AllToAll rows: bytes sent to other ranks (the rest are ignored).
    cross_node : numpy.ndarray of bool
        The row's communicator spans more than one server.

    Returns
    -------
    numpy.ndarray
        Seconds.
    """
    n = np.maximum(nranks.astype(float), 1.0)
    b = bytes_.astype(float)
    if op == "AllReduce":
        wire = 2.0 * (n - 1.0) / n * b
    elif op in ("AllGather", "ReduceScatter"):
        wire = (n - 1.0) * b
    elif op == "AllToAll":
        wire = offnode_bytes.astype(float)
    else:
        wire = b
    gbps = np.where(cross_node, net_gbps, nvlink_gbps)
    return latency_s + wire * 8.0 / (gbps * 1e9)


def check_positive(name: str, value: float) -> None:
    """Raise :class:`TraceError` unless ``value`` is a positive number (option checking)."""
    if not (isinstance(value, int | float) and value > 0):
        raise TraceError(f"option '{name}' must be positive, got {value!r}")


__all__ = [
    "ComputeModel",
    "GPUS",
    "GpuSpec",
    "attention_flops",
    "check_positive",
    "comm_estimate_s",
    "get_gpu",
    "mlp_flops",
]
