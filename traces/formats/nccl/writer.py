"""Write a §3 trace as NCCL debug-log text that :func:`traces.formats.nccl.reader.read_nccl_logs` reads back exactly.

Each global rank becomes one process (``node:pid:pid [dev]``, pid = 1000 + rank) that prints, in order:
the version banner, ring lines (as comm rank 0, when the metadata has rings), one 2.23+ Init COMPLETE line
per communicator it belongs to (with a commId: the comm name when it is already a 64-bit hex id, else a
hash of it), then its COLL lines in row order with 2.24+ TUNING lines after collectives whose ``algo`` is
known. Timestamps use the 2.26 ``[%F %T.%6f] `` prefix when ``t_start_s`` is known (Init lines carry
time 0, so times read back unchanged). An uneven AllToAll (``split_bytes``) is written as PyTorch logs it:
one Send and one Recv per comm rank, zero counts included, sharing one opCount; a uniform one as a 2.28+
``AlltoAll`` line. Per-row detail the log format cannot hold is not written: ``duration_s``,
``context``, a host of ``""`` (written as ``node<rank // gpus_per_node>``), a device that changes between
rows of one rank (the first one is written).
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

from traces.atomic import atomic_output, safe_file_name, short_repr
from traces.lazy import lazy_module
from traces.schema import DTYPE_BYTES, NCCL_DTYPE_VALUES, P2P_OPS, ROOTED_OPS, TraceError, validate

pd = lazy_module("pandas")  # first use imports it: `simrun ingest` of NCCL logs never does

#: Version printed in the banner: the newest format feature written (``AlltoAll`` lines) is 2.28's.
BANNER_VERSION = "2.28.3+cuda12.9"
BASE_EPOCH = np.datetime64("2025-01-01T00:00:00", "us")
_HEX_ID = re.compile(r"^0x[0-9a-f]{1,16}$")


def comm_id_hex(name: str) -> str:
    """The commId written for a comm: its own name when that is a 64-bit hex id, else a stable hash.

    Examples
    --------
    >>> comm_id_hex("0x245d75cdaf12704b")
    '0x245d75cdaf12704b'
    >>> len(comm_id_hex("tp0"))
    18
    """
    if _HEX_ID.match(name):
        return name
    return "0x" + hashlib.blake2b(name.encode(), digest_size=8).hexdigest()


def _stamps(t_s: np.ndarray) -> list[str]:
    """``[%F %T.%6f] `` prefixes for times in seconds from the trace start ("" where NaN)."""
    known = ~np.isnan(t_s)
    us = np.zeros(len(t_s), dtype=np.int64)
    us[known] = np.round(t_s[known] * 1e6).astype(np.int64)
    text = np.datetime_as_string(BASE_EPOCH + us.astype("timedelta64[us]"), unit="us")
    return [f"[{s[:10]} {s[11:]}] " if k else "" for s, k in zip(text, known, strict=True)]


def _members(df: pd.DataFrame, meta: dict) -> dict[str, list[int]]:
    comms = {str(k): [int(r) for r in v] for k, v in (meta.get("comms") or {}).items()}
    for comm, part in df.groupby("comm", sort=False):
        if comm not in comms:  # no metadata: comm ranks in ascending global-rank order
            ranks = sorted(set(part["rank"].tolist()))
            comms[comm] = ranks + [-1] * (int(part["nranks"].max()) - len(ranks))
    return comms


def write_nccl_log(df: pd.DataFrame, out: Path, *, per_host: bool = False) -> list[Path]:
    """Write a trace as NCCL debug-log text.

    Parameters
    ----------
    df : pandas.DataFrame
        A §3 trace (validated first); ``df.attrs["collsim"]["comms"]`` gives comm-rank order.
    out : Path
        The file to write, or with ``per_host`` the folder that gets one ``<host>.log`` per host (the host
        name made safe by :func:`host_files`: a host of ``../x`` cannot write outside the folder).
    per_host : bool
        One file per host instead of one file.

    Returns
    -------
    list of Path
        The files written.

    Raises
    ------
    TraceError
        When the frame is not a valid trace, or a row's rank is not a member of its comm.

    Examples
    --------
    >>> write_nccl_log(df, Path("trace.log"))  # doctest: +SKIP
    [PosixPath('trace.log')]
    """
    frame = validate(df)
    meta = dict(frame.attrs.get("collsim") or {})
    gpn = max(int(meta.get("gpus_per_node") or 8), 1)
    comms = _members(frame, meta)
    comm_rank = {(c, g): k for c, ms in comms.items() for k, g in enumerate(ms) if g >= 0}
    ranks = sorted({g for ms in comms.values() for g in ms if g >= 0} | set(frame["rank"].tolist()))
    host, dev = {}, {}
    for r, part in frame.groupby("rank", sort=False):
        hosts = [h for h in part["host"] if h]
        devs = [d for d in part["device"] if d >= 0]
        host[r] = hosts[0] if hosts else ""
        dev[r] = devs[0] if devs else -1
    host = {r: host.get(r) or f"node{r // gpn}" for r in ranks}
    dev = {r: dev.get(r, -1) for r in ranks}
    timed = bool(frame["t_start_s"].notna().any())
    stamps = _stamps(frame["t_start_s"].to_numpy(dtype=float))
    zero = _stamps(np.zeros(1))[0] if timed else ""
    a2a = {(c, s, r): sb for c, s, r, sb, op in zip(frame["comm"], frame["seq"], frame["rank"],
                                                      frame["split_bytes"], frame["op"], strict=True)
           if op == "AllToAll" and len(sb)}
    rows_of = frame.groupby("rank", sort=False).indices
    comm_idx = {c: k for k, c in enumerate(comms)}
    texts: dict[str, list[str]] = {}
    for r in ranks:
        pid = 1000 + r
        pre = f"{host[r]}:{pid}:{pid} [{max(dev[r], 0)}] NCCL INFO "
        lines = texts.setdefault(host[r] if per_host else "", [])
        lines.append(f"{zero}{pre}NCCL version {BANNER_VERSION}")
        for c, ms in comms.items():
            if r not in ms:
                continue
            k = ms.index(r)
            if k == 0:
                lines += [zero + pre + x for x in _ring_lines(meta, c, ms)]
            lines.append(f"{zero}{pre}ncclCommInitRank comm {_ptr(comm_idx[c])} rank {k} nranks {len(ms)} "
                         f"cudaDev {dev[r]} nvmlDev {dev[r]} busId {(dev[r] + 1) * 0x1000:x} "
                         f"commId {comm_id_hex(c)} - Init COMPLETE")
        idx = rows_of.get(r, np.empty(0, dtype=np.int64))
        _coll_lines(frame, idx, r, pre, stamps, comms, comm_rank, comm_idx, a2a, lines)
    return _write(texts, Path(out), per_host)


def _ptr(k: int) -> str:
    return f"0x{0x55d0c0a00000 + 0x4000 * k:x}"


def _ring_lines(meta: dict, comm: str, members: list[int]) -> list[str]:
    rings = (meta.get("rings") or {}).get(comm) or []
    partial = set((meta.get("rings_partial") or {}).get(comm) or [])
    where = {g: k for k, g in enumerate(members) if g >= 0}
    out = []
    for ch, ring in enumerate(rings):
        if not all(g in where for g in ring):
            continue  # a global rank outside the comm cannot be written as a comm rank
        cut = " ..." if ch in partial else ""
        out.append(f"Channel {ch:02d}/{len(rings):02d} :" + "".join(f" {where[g]}" for g in ring) + cut)
    return out


def _coll_lines(frame: pd.DataFrame, idx: np.ndarray, r: int, pre: str, stamps: list[str],
                comms: dict[str, list[int]], comm_rank: dict, comm_idx: dict, a2a: dict,
                lines: list[str]) -> None:
    opcount: dict[str, int] = {}
    group_opc: dict[tuple[str, int], int] = {}
    cols = {c: frame[c].to_numpy() for c in ("comm", "op", "count", "dtype", "root", "nranks", "group",
                                             "split_bytes", "seq", "algo", "proto", "bytes")}
    for i in idx:
        comm, op = cols["comm"][i], cols["op"][i]
        if (comm, r) not in comm_rank:
            raise TraceError(f"row {i}: rank {r} is not a member of comm {comm!r} in metadata comms")
        group = int(cols["group"][i])
        if group >= 0 and (comm, group) in group_opc:
            opc = group_opc[(comm, group)]
        else:
            opc = opcount.get(comm, 0)
            opcount[comm] = opc + 1
            if group >= 0:
                group_opc[(comm, group)] = opc
        head = f"{stamps[i]}{pre}"
        tail = f"op 0 root {{root}} comm {_ptr(comm_idx[comm])} [nranks={cols['nranks'][i]}] stream 0x7f00beef0000"
        code = NCCL_DTYPE_VALUES[cols["dtype"][i]]
        split = cols["split_bytes"][i]
        if op == "AllToAll" and len(split):
            size = DTYPE_BYTES[cols["dtype"][i]]
            me = comm_rank[(comm, r)]
            members = comms[comm]
            for peer, nbytes in enumerate(split):
                lines.append(f"{head}Send: opCount {opc:x} sendbuff (nil) recvbuff 0x7f0000000000 count "
                             f"{int(nbytes) // size} datatype {code} " + tail.format(root=peer))
            for peer in range(len(split)):
                theirs = a2a.get((comm, cols["seq"][i], members[peer])) if members[peer] >= 0 else None
                nbytes = theirs[me] if theirs is not None and len(theirs) > me else split[peer]
                lines.append(f"{head}Recv: opCount {opc:x} sendbuff (nil) recvbuff 0x7f0000000000 count "
                             f"{int(nbytes) // size} datatype {code} " + tail.format(root=peer))
            continue
        root = int(cols["root"][i]) if op in ROOTED_OPS or op in P2P_OPS else 0
        name = "AlltoAll" if op == "AllToAll" else op
        send = "(nil)" if op in P2P_OPS else "0x7f0000000000"
        lines.append(f"{head}{name}: opCount {opc:x} sendbuff {send} recvbuff 0x7f0100000000 count "
                     f"{cols['count'][i]} datatype {code} " + tail.format(root=root))
        if cols["algo"][i] and cols["proto"][i] and op not in P2P_OPS:
            nbytes = int(cols["bytes"][i]) * (int(cols["nranks"][i]) if op in ("AllGather", "ReduceScatter") else 1)
            lines.append(f"{head}{name}: {nbytes} Bytes -> Algo {cols['algo'][i]} proto {cols['proto'][i]} "
                         "channel{Lo..Hi}={0..0}")


def host_files(hosts: list[str], out: Path) -> dict[str, Path]:
    """One ``<host>.log`` per host inside ``out``; names made safe, so no host can write outside ``out``.

    Raises
    ------
    TraceError
        When two hosts would share a file name once made safe.

    Examples
    --------
    >>> host_files(["node0", "../escaped"], Path("logs"))
    {'node0': PosixPath('logs/node0.log'), '../escaped': PosixPath('logs/_.._escaped.log')}
    """
    files: dict[str, Path] = {}
    owner: dict[str, str] = {}
    for host in hosts:
        name = safe_file_name(host, ".log")
        if name in owner:
            raise TraceError(f"hosts {short_repr(owner[name])} and {short_repr(host)} would both be written to "
                             f"{out / name}")
        owner[name] = host
        files[host] = out / name
    return files


def _write(texts: dict[str, list[str]], out: Path, per_host: bool) -> list[Path]:
    written = []
    try:
        if per_host:
            out.mkdir(parents=True, exist_ok=True)
            for host, path in host_files(list(texts), out).items():
                lines = texts[host]
                with atomic_output(path) as tmp:
                    tmp.write_text("\n".join(lines) + "\n")
                written.append(path)
        else:
            out.parent.mkdir(parents=True, exist_ok=True)
            lines = texts.get("", [])
            with atomic_output(out) as tmp:
                tmp.write_text("\n".join(lines) + ("\n" if lines else ""))
            written.append(out)
    except OSError as exc:
        raise TraceError(f"{out}: cannot write ({exc.strerror or exc})") from None
    return written


__all__ = ["BANNER_VERSION", "BASE_EPOCH", "comm_id_hex", "host_files", "write_nccl_log"]
