"""traces.formats."""


__all__ = []
