"""Every format the registry reads is named in `docs/formats.md` (a section and the `--format` list) and in
`simrun ingest --help` (issue 12: SPEC §2 lists fewer; the docs and the help must not)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from sim.cli import cli
from traces.readers import FORMATS

DOC = (Path(__file__).parents[2] / "docs" / "formats.md").read_text()


def test_formats_page_has_a_section_and_a_choice_for_every_registered_format() -> None:
    sections = set(re.findall(r"^## `([\w-]+)`", DOC, flags=re.MULTILINE))
    assert sections == set(FORMATS)
    choices = re.search(r"--format (auto\|[\w|-]+)\]", DOC).group(1).split("|")
    assert choices == ["auto", *FORMATS]
    rows = set(re.findall(r"^\| `([\w-]+)`", DOC.split("## Detection", 1)[1].split("\n## ", 1)[0], flags=re.MULTILINE))
    assert rows == set(FORMATS)  # every detector is described


def test_ingest_help_names_every_registered_format() -> None:
    result = CliRunner().invoke(cli, ["ingest", "--help"])
    assert result.exit_code == 0
    listed = re.findall(r"^    ([\w-]+)\s{2,}\S", result.output, flags=re.MULTILINE)
    assert listed and set(listed) == set(FORMATS)
