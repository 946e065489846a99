"""The built-in traces shipped in ``traces/data/``: their folder, names and one-line descriptions.

No pandas or pyarrow here: ``simrun traces`` lists them without loading either.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["BUILTIN_DESCRIPTIONS", "builtin_dir", "list_builtin"]

#: One line per built-in trace: what it holds. The file itself is ``traces/data/<name>``.
BUILTIN_DESCRIPTIONS: dict[str, str] = {
    "ds_v3.parquet": "DeepSeek-V3 serving (SGLang), 4 servers x 8 GPUs: DP-attention TP8 + EP32 all-to-all across servers (first 8 of 61 blocks)",
    "ds_v3_tp16.parquet": "DeepSeek-V3 reference engine, TP16 on 2 servers x 8 GPUs: 181 AllReduce per forward",
    "llama3_70b_train.parquet": "Llama-3 70B training step, Megatron TP8/PP4/DP2, 1F1B (AllReduce, Send/Recv)",
}


def builtin_dir() -> Path:
    """Return the folder holding the built-in traces (inside the installed package)."""
    return Path(str(resources.files("traces") / "data"))


def list_builtin() -> list[tuple[str, str]]:
    """List the built-in traces that are present, as ``(name, description)`` pairs, sorted by name."""
    folder = builtin_dir()
    names = sorted(p.name for p in folder.glob("*.parquet")) if folder.is_dir() else []
    return [(n, BUILTIN_DESCRIPTIONS.get(n, "")) for n in names]


