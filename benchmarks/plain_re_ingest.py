"""The baseline of ``bench_ingest.py --cli``: a plain line-by-line ``re`` reader of NCCL COLL lines that
writes Parquet with pandas, run as its own process: ``python plain_re_ingest.py LOG OUT.parquet``."""

from __future__ import annotations

import re
import sys

import pandas as pd

PLAIN_RE = re.compile(
    r"(?:\[([^\]]*)\] )?([^\s:]+):(\d+):(\d+) \[(\d+)\] NCCL INFO (\w+): opCount ([0-9a-f]+) sendbuff (\S+) "
    r"recvbuff (\S+) count (\d+) datatype (\d+) op (\d+) root (-?\d+) comm (\S+) \[nranks=(\d+)\]"
)
COLS = ["ts", "host", "pid", "tid", "dev", "op", "opcount", "sendbuff", "recvbuff", "count", "datatype", "redop",
        "root", "comm", "nranks"]


def main(path: str, out: str) -> int:
    rows = []
    with open(path) as handle:
        for line in handle:
            m = PLAIN_RE.match(line)
            if m:
                rows.append(m.groups())
    df = pd.DataFrame(rows, columns=COLS)
    for col in ("pid", "tid", "dev", "count", "datatype", "redop", "root", "nranks"):
        df[col] = df[col].astype("int64")
    df.to_parquet(out)
    return len(df)


if __name__ == "__main__":
    print(main(sys.argv[1], sys.argv[2]))
