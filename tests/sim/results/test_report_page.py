"""report.html that a person reads: identity, verdict first, units, no raw dump, words instead of empty plots,
byte-identical for identical runs; a real headless browser renders it (slow)."""

from __future__ import annotations

import re
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

import sim
import topologies


class _Page(HTMLParser):
    """Headings, images with the paragraph before each, and text."""

    def __init__(self) -> None:
        super().__init__()
        self.headings: list[str] = []
        self.images: list[tuple[str, str]] = []
        self.text: list[str] = []
        self._tag = ""
        self._last_how = ""

    def handle_starttag(self, tag, attrs):
        self._tag = tag
        a = dict(attrs)
        if tag == "img":
            self.images.append((a["src"], self._last_how))
            self._last_how = ""
        if tag == "p" and a.get("class") == "how":
            self._tag = "how"

    def handle_data(self, data):
        self.text.append(data)
        if self._tag in ("h1", "h2", "h3"):
            self.headings.append(data.strip())
        if self._tag == "how":
            self._last_how += data


def _graph(oversubscription=2.0):
    return topologies.build("leaf_spine", num_gpus=16, gpus_per_server=1, gpus_per_leaf=4,
                            oversubscription=oversubscription)


@pytest.fixture(scope="module")
def pages(tmp_path_factory, small_step_trace):
    outs = []
    for k in range(2):
        res = sim.simulate(small_step_trace, _graph(), trace_name="step.parquet")
        outs.append(res.write(tmp_path_factory.mktemp(f"r{k}")))
    return outs


def test_identical_runs_give_byte_identical_reports(pages):
    a, b = pages
    assert (a / "report.html").read_bytes() == (b / "report.html").read_bytes()
    for png in sorted(p.name for p in a.glob("*.png")):
        assert (a / png).read_bytes() == (b / png).read_bytes(), png


def test_header_identifies_the_run_and_the_verdict_comes_first(pages):
    html = (pages[0] / "report.html").read_text()
    p = _Page()
    p.feed(html)
    assert p.headings[:3] == ["step.parquet on leaf_spine", "Verdict", "Figures"]
    for needed in ("oversubscription=2.0", "link_gbps=400.0", "nvlink_gbps=", "gpus_per_leaf=4", "routing", "ecmp",
                   "algorithm", "timing", "gaps", "seed", "collsim version", "anomalies"):
        assert needed in html, needed
    # no raw dump of summary.json
    for raw in ("memo_hits", "bytes_on_wire", "e+10", "network_events"):
        assert raw not in html, raw
    assert re.search(r"\d+\.\d{3} ms", html) and re.search(r"\d+\.\d{2} (GB|MB)", html) and " %" in html


def test_every_figure_has_a_sentence_on_how_to_read_it(pages):
    p = _Page()
    p.feed((pages[0] / "report.html").read_text())
    assert len(p.images) >= 4
    for src, how in p.images:
        assert (pages[0] / src).is_file(), src
        assert len(how.split()) >= 12, (src, how)
    assert "below 1" in (pages[0] / "report.html").read_text().lower()  # what below/above 1 means


def test_tables_per_role_op_and_tier(pages):
    html = (pages[0] / "report.html").read_text()
    for heading in ("Per communicator role", "Per op type", "Link tiers", "Hot links",
                    "Collectives the fabric delayed most"):
        assert f"<h2>{heading}</h2>" in html
    assert "<th>DP</th>" in html and "<th>AllReduce</th>" in html and "leaf-spine up" in html


def test_a_trace_without_network_traffic_says_so_in_words(tmp_path, tp_only_trace):
    res = sim.simulate(tp_only_trace, topologies.build("fat_tree", num_gpus=8, gpus_per_server=8))
    out = res.write(tmp_path / "tp", timeline=False)
    html = (out / "report.html").read_text()
    assert "No traffic crossed a network link" in html and "No incast event" in html
    assert not (out / "incast_timeline.png").exists()  # words, not an empty plot
    assert "nvlink" in html and "fabric cannot matter" in html


@pytest.mark.slow
def test_a_headless_browser_renders_the_report(pages, tmp_path):
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        pytest.skip("no Chromium on this machine (apt-get install chromium)")
    shot = tmp_path / "report.png"
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={shot}",
                    "--window-size=1400,3000", (pages[0] / "report.html").as_uri()], check=True, timeout=120,
                   capture_output=True)
    from PIL import Image

    img = Image.open(shot).convert("L")
    assert img.size == (1400, 3000)
    # rendered content, not a blank page: many distinct grey levels and dark text pixels
    hist = img.histogram()
    assert sum(1 for h in hist if h) > 50 and sum(hist[:64]) > 2000
