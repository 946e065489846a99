"""NCCL log lines built from their format strings (docs/nccl_formats.md), and the reads of them, for the NCCL
reader's tests."""

from __future__ import annotations

from traces.formats.nccl.reader import read_nccl_logs
from traces.schema import TraceError


def coll(op="AllReduce", opc="0", count=1024, dt=7, root=0, comm="0xc0", nranks=2, sb="0x10", rb="0x20",
         extra="", tail=""):
    """The section 2 format string, field by field."""
    return (f"{op}: opCount {opc} sendbuff {sb} recvbuff {rb}{extra} count {count} datatype {dt} op 0 "
            f"root {root} comm {comm} [nranks={nranks}] stream 0x30{tail}")


def pre(host="h", pid=10, dev=0):
    """The ``host:pid:tid [dev] NCCL INFO`` prefix."""
    return f"{host}:{pid}:{pid} [{dev}] NCCL INFO "


def read_lines(tmp_path, lines, name="x.log", **kw):
    """Write ``lines`` to one log file and read it (trace, report)."""
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return read_nccl_logs([path], **kw)


def read_all(paths):
    """(rows, metadata, report) or the error message of read_nccl_logs."""
    try:
        df, report = read_nccl_logs(paths)
    except TraceError as exc:
        return str(exc)
    return df, df.attrs, report.as_dict()


__all__ = ["coll", "pre", "read_all", "read_lines"]
