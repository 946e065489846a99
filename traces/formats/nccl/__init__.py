"""traces.formats.nccl."""
