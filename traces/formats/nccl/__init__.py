"""traces.formats.nccl."""


__all__ = []
