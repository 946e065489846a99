"""Virtual nccl-tests (``simrun bench``) and validation against measured tables (``simrun validate``)."""


__all__ = []
