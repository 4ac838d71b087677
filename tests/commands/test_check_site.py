"""scripts/check-site: the launch block as headless Chromium renders it (skips without Chromium)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "check-site"


def load():
    loader = importlib.machinery.SourceFileLoader("check_site", str(SCRIPT))
    spec = importlib.util.spec_from_loader("check_site", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_launch_text_reads_the_block_under_the_launch_heading_only():
    m = load()
    dom = (
        '<h2 id="converting">Converting</h2><pre><code>cookbook convert x</code></pre>'
        '<h2 id="launch">Launch</h2><p>Paste</p><div><pre><span></span><code>vllm <span>serve</span> m \\\n'
        "  --port 8000</code></pre></div><pre>later</pre>"
    )
    assert m.launch_text(dom) == "vllm serve m \\\n  --port 8000"
    assert m.launch_text('<h2 id="launch">Launch</h2><p>no block</p>') is None


def test_without_chromium_it_skips_and_says_so(tmp_path):
    env = {"PATH": str(tmp_path), "NO_MKDOCS_2_WARNING": "1"}  # no browser on this PATH
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "skipped: no Chromium" in p.stdout
    p = subprocess.run(
        [sys.executable, str(SCRIPT), "--require", "--out", str(tmp_path)], capture_output=True, text=True, env=env
    )
    assert p.returncode == 1


@pytest.mark.slow
@pytest.mark.slow_tier("site")
@pytest.mark.skipif(load().browser() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_chromium_renders_the_launch_blocks(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the rendered launch block is `cookbook launch gemma3-270m-cpu`" in p.stdout
    for name in ("index", "gemma3-270m-cpu", "glm52-mxfp4-8x-gaudi2", "glm52-8"):
        assert (tmp_path / f"{name}-1280.png").is_file() and (tmp_path / f"{name}-1920.png").is_file()
    assert (tmp_path / "gemma3-270m-cpu.html").is_file()
    assert "index at 1280 px: no clipped table, no placeholder" in p.stdout


@pytest.mark.skipif(load().browser() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_console_messages_of_a_page_are_seen(tmp_path):
    """The check fails a page on its console output; this page logs an error and throws."""
    mod = load()
    page = tmp_path / "p.html"
    page.write_text('<html><body><script>console.error("boom"); missingFn();</script><p>x</p></body></html>')
    r = mod.chromium(mod.browser(), str(tmp_path / "profile"), "--dump-dom", page.as_uri())
    found = mod.CONSOLE.findall(r.stderr)
    assert any("boom" in m for m in found) and any("missingFn" in m for m in found), r.stderr[-2000:]


def test_a_placeholder_is_seen_and_bash_variables_and_json_are_not():
    m = load()
    assert m.PLACEHOLDER.findall("--tp {serve.args.tensor_parallel_size} on {hardware.gpus}") == [
        "{serve.args.tensor_parallel_size}",
        "{hardware.gpus}",
    ]
    assert m.PLACEHOLDER.findall('"${COOKBOOK:-$PWD}" ${MODELS}/x {"a": {}} jq \'{reasoning: .r}\'') == []


def test_layout_failures_name_each_problem():
    m = load()
    ok = {"clipped": [], "images": [], "ids": [], "text": "fine"}
    assert m.layout_failures("index", 1280, ok) == []
    assert m.layout_failures("index", 1280, None)[0].endswith("the probe page got no measurements")
    cut = {**ok, "clipped": [{"table": 0, "columns": ["model", "H100"], "cut": ["H100"], "scroll": 900, "box": 700}]}
    assert "table 0 (model, H100...) is clipped" in m.layout_failures("index", 1280, cut)[0]
    assert "{quant.name}" in m.layout_failures("index", 1920, {**ok, "text": "is {quant.name} GiB"})[0]
    assert "did not load: ../plots/x.svg" in m.layout_failures("index", 1280, {**ok, "images": ["../plots/x.svg"]})[0]


def test_a_recipe_page_missing_or_reordering_a_section_fails():
    m = load()
    want = m.expected_sections("glm52-8")
    assert {"will-it-fit", "talk-to-it", "performance", "multi-node", "notes-from-the-source-document"} <= set(want)
    assert "gates" not in want or want.index("gates") < want.index("performance")
    page = {"clipped": [], "images": [], "text": ""}
    assert m.layout_failures("glm52-8", 1280, {**page, "ids": want}) == []
    lacking = m.layout_failures("glm52-8", 1280, {**page, "ids": [i for i in want if i != "talk-to-it"]})
    assert lacking == ["glm52-8: the page lacks section(s) its recipe has data for: talk-to-it"]
    swapped = [want[1], want[0], *want[2:]]
    assert "sections out of order" in m.layout_failures("glm52-8", 1280, {**page, "ids": swapped})[0]
    # a 2-GPU recipe has no multi-node part to lack
    assert "multi-node" not in m.expected_sections("glm52-2")


@pytest.mark.skipif(load().browser() is None, reason="Chromium is not installed (apt-get install chromium)")
def test_the_probe_measures_a_clipped_column_in_chromium(tmp_path):
    """The probe page, in Chromium, sees a column pushed out of its scrolling box, and one that fits."""
    mod = load()
    site = tmp_path / "site"
    site.mkdir()
    (site / "check-site-probe.html").write_text(mod.PROBE, encoding="utf-8")
    table = (
        '<article><h2 id="a">A</h2><div class="md-typeset__scrollwrap" style="width:{w}px;overflow-x:auto">'
        "<table><thead><tr><th style='min-width:300px'>model</th><th style='min-width:300px'>H200</th></tr>"
        "</thead><tbody><tr><td>x</td><td>y</td></tr></tbody></table></div><p>see {{serve.args.x}}</p></article>"
    )
    (site / "wide.html").write_text(table.format(w=400), encoding="utf-8")
    (site / "fits.html").write_text(table.format(w=900), encoding="utf-8")
    profile = str(tmp_path / "profile")
    with mod.serve(site) as url:
        wide = mod.probe(mod.browser(), profile, url, "wide.html", 1280)
        fits = mod.probe(mod.browser(), profile, url, "fits.html", 1280)
    assert wide["clipped"] and wide["clipped"][0]["cut"] == ["H200"]
    assert fits["clipped"] == [] and fits["ids"] == ["a"]
    assert mod.PLACEHOLDER.findall(fits["text"]) == ["{serve.args.x}"]
