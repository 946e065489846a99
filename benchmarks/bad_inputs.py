"""Battery of bad inputs (issue 13): every case through the CLI in a fresh process, or through the API.

    PYTHONPATH=$PWD python benchmarks/bad_inputs.py [--only ID[,ID...]] [--skip-slow] [--list]

Prints one line per failing case and a final count. A CLI case passes when ``simrun`` exits with the
expected code and, for exit 2, prints exactly one stderr line that starts ``simrun: error:`` and contains
the expected words (never a traceback); an API case passes when the call raises the expected ``ValueError``
subclass (or, for a case that must work, when its check finds nothing wrong).

The cases live in ``benchmarks/bad_inputs_cases/`` (one module per area). Every CLI case runs with a 6 GB
address-space limit and a timeout, so that a case that would allocate without bound fails instead of
taking the machine's memory. ``tests/test_hardening_battery.py`` runs the same cases with pytest.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the bad_inputs_cases package beside this file

from bad_inputs_cases import CASES  # noqa: E402
from bad_inputs_cases.common import TIMEOUT_S, Case, Outcome  # noqa: E402

__all__ = ["CASES", "Case", "Outcome", "dev_full_ok", "judge_api", "judge_cli", "run_case", "run_cli"]

MEMORY_LIMIT_BYTES = 6 * 1024**3


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    # a battery started in the background of a shell inherits SIGINT ignored: Ctrl-C cases need it back
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_cli(case: Case, folder: Path) -> Outcome:
    """Run a CLI case as ``python -m sim ...`` in a fresh process (memory-limited, with a timeout)."""
    argv = case.argv(folder)
    proc = subprocess.Popen([sys.executable, "-m", "sim", *argv], cwd=folder, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_limit_memory)
    try:
        if case.signal_after_s is not None:
            time.sleep(case.signal_after_s)
            proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        return Outcome(None, out, err + f"\n(timed out after {TIMEOUT_S} s)", folder)
    return Outcome(proc.returncode, out, err, folder)


def judge_cli(case: Case, out: Outcome) -> str | None:
    """None when the outcome is what the case expects, else what went wrong (one line)."""
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    if "Traceback" in out.stderr:
        return f"traceback, exit {out.code}: {lines[-1][:160] if lines else ''}"
    if case.code is None:
        if out.code not in (0, 2):
            return f"exit {out.code}: {' | '.join(lines)[:200]}"
    elif out.code != case.code:
        return f"exit {out.code}, expected {case.code}: {' | '.join(lines)[:200]}"
    if out.code == 2:
        if len(lines) != 1 or not lines[0].startswith("simrun: error: "):
            return f"{len(lines)} stderr lines, expected one 'simrun: error:' line: {' | '.join(lines)[:200]}"
        if case.expect and case.expect not in lines[0]:
            return f"message lacks {case.expect!r}: {lines[0][:200]}"
    return case.check(out.folder, out) if case.check else None


def judge_api(case: Case, folder: Path) -> str | None:
    """Run an API case in this process."""
    try:
        call = case.call(folder)
        result = call()
    except Exception as exc:  # noqa: BLE001 - the point is to see which exception comes out
        if not case.error:
            return f"raised {type(exc).__name__}: {str(exc)[:160]}"
        names = {c.__name__ for c in type(exc).__mro__}
        if case.error not in names or not isinstance(exc, ValueError):
            return f"raised {type(exc).__name__} (not a ValueError subclass {case.error}): {str(exc)[:160]}"
        if "\n" in str(exc).strip() or len(str(exc)) > 600:
            return f"message is not one short line: {str(exc)[:160]!r}"
        return None
    if case.error:
        return f"raised nothing, expected {case.error}"
    return result if isinstance(result, str) else None


def run_case(case: Case) -> str | None:
    with tempfile.TemporaryDirectory(prefix=f"bad-{case.id}-") as tmp:
        folder = Path(tmp)
        if "dev-full" in case.tags and not dev_full_ok():
            return None
        if case.argv is not None:
            return judge_cli(case, run_cli(case, folder))
        return judge_api(case, folder)


def dev_full_ok() -> bool:
    import stat

    try:
        return stat.S_ISCHR(os.stat("/dev/full").st_mode)
    except OSError:
        return False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", default="", help="Comma-separated case ids.")
    parser.add_argument("--skip-slow", action="store_true", help="Skip the slow cases (Ctrl-C, determinism, ...).")
    parser.add_argument("--list", action="store_true", help="List the cases and exit.")
    args = parser.parse_args()
    only = {x for x in args.only.split(",") if x}
    cases = [c for c in CASES if (not only or c.id in only) and not (args.skip_slow and c.slow)]
    if args.list:
        for case in cases:
            print(f"{case.id:<28} {'slow ' if case.slow else ''}{case.what}")
        return 0
    failed = 0
    t0 = time.perf_counter()
    for case in cases:
        problem = run_case(case)
        if problem is None:
            continue
        failed += 1
        print(f"FAIL {case.id}: {case.what}: {problem}", flush=True)
    print(f"{len(cases)} cases, {failed} failed ({time.perf_counter() - t0:.0f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
