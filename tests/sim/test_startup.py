"""A fresh process that simulates a few flows loads none of the heavy optional libraries (start-up, issue 14)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("scipy", "numba", "matplotlib", "seaborn", "dask", "rich")


def test_simulate_flows_in_a_fresh_process_imports_no_heavy_library():
    code = (
        "import sys, json, numpy as np, pandas as pd, sim, topologies\n"
        "n = 16; s, d = np.divmod(np.arange(n * n), n); m = s != d\n"
        "df = pd.DataFrame({'src': s[m], 'dst': d[m], 'bytes': 1 << 16, 'start_s': 0.0})\n"
        "out = sim.simulate_flows(topologies.build('fat_tree', num_gpus=n, gpus_per_server=4), df)\n"
        f"print(json.dumps([len(out), float(out.finish_s.max()), [m for m in {HEAVY!r} if m in sys.modules]]))\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    flows, last_finish_s, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert flows == 16 * 15 and last_finish_s > 0
    # small problems stay on the numpy max-min solver, routing needs no scipy, nothing plots
    assert loaded == []
