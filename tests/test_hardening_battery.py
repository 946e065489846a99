"""One test per case of the bad-input battery (``benchmarks/bad_inputs.py``, issue 13).

CLI cases run ``sim.cli.main`` in this process (the battery script runs them in fresh processes) and
assert the exit code and that stderr is one ``simrun: error:`` line holding the expected words; API cases
assert the ``ValueError`` subclass raised. Cases with a memory or signal risk (``fresh``) run in a
memory-limited subprocess; slow cases are marked ``slow`` (CI skips them).
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import sys
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("bad_inputs", Path(__file__).parents[1] / "benchmarks" / "bad_inputs.py")
battery = importlib.util.module_from_spec(_SPEC)
sys.modules.setdefault("bad_inputs", battery)  # dataclasses look their module up there
_SPEC.loader.exec_module(battery)


def _run_in_process(case, folder: Path, monkeypatch) -> battery.Outcome:
    from sim.cli import main

    monkeypatch.chdir(folder)
    monkeypatch.setenv("SIMRUN_QUIET_ERRORS", "")
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(case.argv(folder))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
    return battery.Outcome(code, out.getvalue(), err.getvalue(), folder)


def _params():
    for case in battery.CASES:
        marks = []
        if case.slow:
            marks.append(pytest.mark.slow)
        if "dev-full" in case.tags:
            marks.append(pytest.mark.skipif(not battery.dev_full_ok(), reason="no /dev/full device"))
        yield pytest.param(case, id=case.id, marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_bad_input(case, tmp_path, monkeypatch):
    if case.argv is None:
        problem = battery.judge_api(case, tmp_path)
    elif case.owner == "options" or case.signal_after_s is not None or "fresh" in case.tags:
        problem = battery.judge_cli(case, battery.run_cli(case, tmp_path))  # fresh, memory-limited process
    else:
        problem = battery.judge_cli(case, _run_in_process(case, tmp_path, monkeypatch))
    assert problem is None, f"{case.id}: {case.what}: {problem}"


def test_every_case_states_what_it_expects():
    ids = [c.id for c in battery.CASES]
    assert len(ids) == len(set(ids))
    for case in battery.CASES:
        assert (case.argv is None) != (case.call is None), case.id
        if case.argv is not None and case.code == 2:
            assert case.expect, case.id
