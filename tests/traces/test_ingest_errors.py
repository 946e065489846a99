"""Issue 12 item 7: the Python API answers like the CLI. `traces.ingest` and every registered reader raise
one-line `CollsimError`s naming the file (and line), and `simrun ingest` prints exactly that line, hints
included, with exit code 2."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

import traces
from sim.cli import main
from traces.errors import CollsimError
from traces.readers import FORMATS

INIT = "h:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xab - Init COMPLETE\n"
COLL = ("h:1:1 [0] NCCL INFO AllReduce: opCount 0 sendbuff 0x1 recvbuff 0x2 count 4 datatype {dt} op 0 root 0 "
        "comm 0x1 [nranks=1] stream 0x3\n")


@pytest.fixture()
def bad(tmp_path: Path) -> Path:
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "bin.log").write_bytes(b"\x00\x01\x02binary\x00")
    (tmp_path / "init_only.log").write_text(INIT)
    (tmp_path / "bad_dtype.log").write_text(COLL.format(dt=99))
    (tmp_path / "cut.json").write_text('{"header": 1,\n')
    (tmp_path / "folder").mkdir()
    (tmp_path / "folder" / "README.md").write_text("# not a trace\n")
    (tmp_path / "nothing").mkdir()
    return tmp_path


CASES = [  # (inputs, CLI options, what the message must hold)
    (["missing.log"], [], "missing.log: no such file"),
    (["empty.log"], [], "empty.log: empty file"),
    (["bin.log"], [], "bin.log: binary data"),
    (["init_only.log"], [], "log with NCCL_DEBUG_SUBSYS=COLL"),  # the reader's hint reaches the user
    (["bad_dtype.log"], [], "unknown datatype code 99 (first at"),
    (["bad_dtype.log"], ["--strict"], "bad_dtype.log:1: unknown datatype code 99"),
    (["cut.json"], [], "cut.json: cannot tell the trace format"),
    (["cut.json"], ["--format", "inspector"], "cut.json:1"),
    (["folder"], [], "folder holds no trace files"),
    (["nothing"], [], "folder holds no files"),
    (["nomatch*.log"], [], "no file matches this pattern"),
    (["init_only.log", "cut.json"], [], "cut.json: cannot tell"),
]


def _api(paths: list[str], opts: list[str]) -> str:
    kw: dict = {"strict": "--strict" in opts}
    if "--format" in opts:
        kw["format"] = opts[opts.index("--format") + 1]
    with pytest.raises(CollsimError) as err:
        traces.ingest(paths, **kw)
    return str(err.value)


@pytest.mark.parametrize(("names", "opts", "expected"), CASES)
def test_api_and_cli_say_the_same_one_line(bad: Path, capsys, names, opts, expected) -> None:
    paths = [str(bad / n) for n in names]
    message = _api(paths, opts)
    assert "\n" not in message and expected in message
    out = bad / "out.parquet"
    with pytest.raises(SystemExit) as code:
        main(["ingest", *paths, *opts, "-o", str(out)])
    assert code.value.code == 2
    assert capsys.readouterr().err == f"simrun: error: {message}\n"
    assert not out.exists()


@pytest.mark.parametrize("fmt", list(FORMATS))
@pytest.mark.parametrize("name", ["missing.log", "nothing", "empty.log", "bin.log", "cut.json", "bad_dtype.log"])
def test_every_reader_raises_one_line_naming_the_file(bad: Path, fmt: str, name: str) -> None:
    module, function, _ = FORMATS[fmt]
    reader = getattr(importlib.import_module(module), function)
    for strict in (False, True):
        try:
            reader([bad / name], strict=strict)
        except CollsimError as exc:  # the only kind of exception bad input may give
            assert "\n" not in str(exc) and name in str(exc), str(exc)
