"""`simrun ingest` and `simrun export` through the real entry point (``sim.cli.main``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from sim.cli import main
from traces.io import read_trace

DATA = Path(__file__).parents[1] / "data" / "traces"
KINETO = DATA / "kineto" / "01_hta_ddp_2rank_rank0_collective_subset.json"


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_ingest_writes_parquet_and_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "t.parquet"
    code, stdout, stderr = _run(["ingest", str(KINETO), "-o", str(out)], capsys)
    assert code == 0, stderr
    df = read_trace(out)
    assert len(df) == 21 and df.attrs["collsim"]["ingest"]["records"] == 21
    line = stdout.strip()
    assert "\n" not in line and "21 rows, 1 ranks, 1 comms" in line and "nothing skipped" in line


def test_ingest_folder_with_explicit_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "et.parquet"
    code, stdout, _ = _run(["ingest", str(DATA / "pytorch_et"), "--format", "param", "-o", str(out)], capsys)
    assert code == 0 and "37 rows, 2 ranks" in stdout


@pytest.mark.parametrize("content, needle", [(b"", "empty file"), (b"\x00\x00garbage\xff", "binary"),
                                             (b'{"traceEvents": [\n{"ph": oops}]}', ":2: malformed JSON"),
                                             (b"hello world\n", "cannot tell the trace format")])
def test_bad_input_exit_2_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes,
                                   needle: str) -> None:
    bad = tmp_path / "bad_input.json"
    bad.write_bytes(content)
    code, _, stderr = _run(["ingest", str(bad), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("simrun: error:")
    assert "bad_input.json" in lines[0] and needle in lines[0]
    assert not (tmp_path / "o.parquet").exists()


def test_missing_file_and_mixed_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = _run(["ingest", str(tmp_path / "absent.json"), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2 and "absent.json" in stderr and stderr.startswith("simrun: error:")
    et = DATA / "pytorch_et" / "03_param_resnet_2gpu_chakra_et_collective_subset.json"
    code, _, stderr = _run(["ingest", str(KINETO), str(et), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2 and "mixed trace formats" in stderr


def test_strict_turns_skips_into_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "0.json"
    trace.write_text('[{"comms": "all_reduce", "in_msg_size": 4, "dtype": "complex64", "world_size": 1},'
                     ' {"comms": "all_reduce", "in_msg_size": 4, "dtype": "float", "world_size": 1}]')
    code, stdout, _ = _run(["ingest", str(trace), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 0 and "skipped 1" in stdout and "0.json:record 0" in stdout
    code, _, stderr = _run(["ingest", str(trace), "--strict", "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2 and "0.json:record 0" in stderr


def test_no_collectives_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "3.json"
    trace.write_text('[{"comms": "barrier", "req": 1}]')
    code, _, stderr = _run(["ingest", str(trace), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 2 and "3.json: no collective operations found" in stderr


def test_export_unknown_format_is_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, stderr = _run(["export", str(KINETO), "--format", "csv", "-o", str(tmp_path / "x")], capsys)
    assert code == 2 and stderr.startswith("simrun: error:") and "csv" in stderr


def test_export_refuses_to_write_over_its_own_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parquet = tmp_path / "t.parquet"
    assert _run(["ingest", str(KINETO), "-o", str(parquet)], capsys)[0] == 0
    before = parquet.read_bytes()
    code, _, stderr = _run(["export", str(parquet), "--format", "nccl", "-o", str(parquet)], capsys)
    assert code == 2 and "the output is the trace being exported" in stderr and parquet.read_bytes() == before


def test_export_nccl(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if importlib.util.find_spec("traces.formats.nccl.reader") is None:
        pytest.skip("traces.formats.nccl.reader is not written yet")
    parquet = tmp_path / "t.parquet"
    assert _run(["ingest", str(KINETO), "-o", str(parquet)], capsys)[0] == 0
    code, stdout, stderr = _run(["export", str(parquet), "--format", "nccl", "-o", str(tmp_path / "log.txt")],
                                capsys)
    assert code == 0, stderr
    back = tmp_path / "back.parquet"
    assert _run(["ingest", str(tmp_path / "log.txt"), "--format", "nccl", "-o", str(back)], capsys)[0] == 0
    assert read_trace(back)["bytes"].sum() == read_trace(parquet)["bytes"].sum()


def test_cli_prints_the_library_error_and_hint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from traces.readers import ingest
    from traces.schema import TraceError

    log = Path(__file__).parents[1] / "data" / "nccl_logs" / "sample_02.log"
    code, _, stderr = _run(["ingest", str(log), "-o", str(tmp_path / "o.parquet")], capsys)
    with pytest.raises(TraceError) as err:
        ingest(log)
    assert code == 2 and stderr.strip() == f"simrun: error: {err.value}"
    assert "log with NCCL_DEBUG_SUBSYS=COLL" in stderr


def test_cli_reads_a_folder_of_compressed_logs_and_skips_a_readme(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import gzip

    logs = Path(__file__).parents[1] / "data" / "nccl_logs"
    (tmp_path / "logs" / "n0").mkdir(parents=True)
    (tmp_path / "logs" / "n0" / "x.log.gz").write_bytes(gzip.compress((logs / "sample_07.log").read_bytes()))
    (tmp_path / "logs" / "README.md").write_text("how we ran it\n")
    code, stdout, stderr = _run(["ingest", str(tmp_path / "logs"), "-o", str(tmp_path / "o.parquet")], capsys)
    assert code == 0, stderr
    meta = read_trace(tmp_path / "o.parquet").attrs["collsim"]
    assert "7 rows, 2 ranks, 1 comms" in stdout and meta["ingest"]["files_skipped"] == 1
