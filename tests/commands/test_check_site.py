"""scripts/check-site: the site as headless Chromium (under Playwright) renders it (skips without Chromium)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import re
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


def _playwright() -> bool:
    return importlib.util.find_spec("playwright") is not None


chromium = pytest.mark.skipif(
    load().browser() is None or not _playwright(),
    reason="Chromium or Playwright is not installed (apt-get install chromium; the dev extra)",
)


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
@chromium
def test_chromium_renders_the_launch_blocks(tmp_path):
    p = subprocess.run([sys.executable, str(SCRIPT), "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "the rendered launch block is `cookbook launch gemma3-270m-cpu`" in p.stdout
    for name in ("index", "gemma3-270m-cpu", "glm52-mxfp4-8x-gaudi2", "glm52-8"):
        assert (tmp_path / f"{name}-1280.png").is_file() and (tmp_path / f"{name}-1920.png").is_file()
    assert (tmp_path / "gemma3-270m-cpu.html").is_file()
    assert (tmp_path / "search-1280.png").is_file() and (tmp_path / "search-none-1280.png").is_file()
    assert "index at 1280 px: no clipped table, no placeholder" in p.stdout
    for hw in ("h100", "a100-40gb"):  # the filter checks ran, passed and left their screenshots
        assert re.search(rf"index\?hw={hw}: \d+ {hw} recipe\(s\), no lone heading; its notes: ", p.stdout), p.stdout
        assert (tmp_path / f"index-{hw}-1280.png").is_file()


@chromium
def test_console_messages_of_a_page_are_seen(tmp_path):
    """The check fails a page on its console output; this page logs an error, throws and loads a
    missing image. A failed load from another host (the theme's Google Fonts offline) is left out."""
    mod = load()
    (tmp_path / "p.html").write_text(
        '<html><head><link rel="stylesheet" href="http://fonts.invalid/f.css"></head><body>'
        '<script>console.error("boom"); missingFn();</script><img src="gone.png"><p>x</p></body></html>'
    )
    with mod.serve(tmp_path) as url, mod.chromium(mod.browser()) as b:
        page = mod.load(b, f"{url}/p.html", "p", 800)
    said = "\n".join(page.console)
    assert "boom" in said and "missingFn" in said and "gone.png" in said, said
    assert "fonts.invalid" not in said, said
    assert mod.console_check(None, "p", [page])[0].startswith("p: ")


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
    assert m.layout_failures("index", 1280, None)[0].endswith("the page got no measurements")
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


@chromium
def test_the_measurement_sees_a_clipped_column_in_chromium(tmp_path):
    """Measured in Chromium, a column pushed out of its scrolling box is clipped, one that fits is not."""
    mod = load()
    table = (
        '<article><h2 id="a">A</h2><div class="md-typeset__scrollwrap" style="width:{w}px;overflow-x:auto">'
        "<table><thead><tr><th style='min-width:300px'>model</th><th style='min-width:300px'>H200</th></tr>"
        "</thead><tbody><tr><td>x</td><td>y</td></tr></tbody></table></div><p>see {{serve.args.x}}</p></article>"
    )
    (tmp_path / "wide.html").write_text(table.format(w=400), encoding="utf-8")
    (tmp_path / "fits.html").write_text(table.format(w=900), encoding="utf-8")
    with mod.serve(tmp_path) as url, mod.chromium(mod.browser()) as b:
        wide = mod.load(b, f"{url}/wide.html", "wide", 1280, tmp_path / "wide.png").seen
        fits = mod.load(b, f"{url}/fits.html", "fits", 1280).seen
    assert wide["clipped"] and wide["clipped"][0]["cut"] == ["H200"]
    assert fits["clipped"] == [] and fits["ids"] == ["a"]
    assert mod.PLACEHOLDER.findall(fits["text"]) == ["{serve.args.x}"]
    assert (tmp_path / "wide.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_search_verdict_wants_a_named_recipe_and_nothing_for_nonsense():
    m = load()
    url = "http://127.0.0.1:9"
    item = {"href": f"{url}/recipes/dsv4-2.html#launch", "title": "dsv4-2"}
    found = {"meta": "2 matching documents", "items": [item], "answered": True, "seconds": 1.0}
    assert m.search_verdict("DeepSeek", found, url, ["dsv4-2", "dsv4-4"]) == []
    other = {**found, "items": [{"href": f"{url}/index.html#deepseek", "title": "x"}]}
    assert "lists no page of dsv4-2" in m.search_verdict("DeepSeek", other, url, ["dsv4-2"])[0]
    none = {"meta": "No matching documents", "items": [], "answered": True, "seconds": 1.0}
    assert m.search_verdict("qzx", none, url, []) == []
    assert "should find nothing, but lists recipes/dsv4-2.html" in m.search_verdict("qzx", found, url, [])[0]
    silent = {"meta": "Initializing search", "items": [], "answered": False, "seconds": 60.0}
    assert "no answer in 60.0 s" in m.search_verdict("DeepSeek", silent, url, ["dsv4-2"])[0]
    assert "no search box" in m.search_verdict("x", {**silent, "clicked": False}, url, [])[0]


# A stand-in for the theme's search: the box's keyup asks a Web Worker, which answers after
# 300 ms of real time (as the theme's worker answers once its index is built); only then does the
# overlay show results. Under --dump-dom's virtual time this page never showed an answer.
FAKE_SEARCH = """<!doctype html><html><body>
<script id="__config" type="application/json">{"translations": {"search.result.none": "No matching documents",
 "search.result.placeholder": "Type to start searching"}}</script>
<input data-md-component="search-query" style="width:300px;height:30px">
<div class="md-search-result__meta">Initializing search</div><ol></ol>
<script>
var w = new Worker("worker.js"), box = document.querySelector("input");
box.addEventListener("keyup", function () { w.postMessage(box.value); });
w.onmessage = function (e) {
  var hits = e.data, ol = document.querySelector("ol");
  document.querySelector(".md-search-result__meta").textContent =
    hits.length ? hits.length + " matching documents" : "No matching documents";
  ol.innerHTML = hits.map(function (h) {
    return '<li class="md-search-result__item"><a href="' + h + '"><h1>' + h + '</h1></a></li>';
  }).join("");
};
</script></body></html>"""
FAKE_WORKER = """onmessage = function (e) {
  var q = e.data;
  setTimeout(function () { postMessage(q === "DeepSeek" ? ["recipes/dsv4-2.html", "index.html#deepseek"] : []); }, 300);
};"""


@chromium
def test_search_types_into_the_box_and_waits_for_the_workers_answer(tmp_path):
    mod = load()
    site = tmp_path / "site"
    site.mkdir()
    (site / "index.html").write_text(FAKE_SEARCH, encoding="utf-8")
    (site / "worker.js").write_text(FAKE_WORKER, encoding="utf-8")
    with mod.serve(site) as url, mod.chromium(mod.browser()) as b:
        found = mod.search(b, url, "DeepSeek", shot=tmp_path / "shot.png", timeout=20, settle=0.5)
        nothing = mod.search(b, url, "qzxvkjwq", timeout=20, settle=0.5)
    assert found["answered"] and found["value"] == "DeepSeek" and found["focused"], found
    assert [i["href"] for i in found["items"]] == [f"{url}/recipes/dsv4-2.html", f"{url}/index.html#deepseek"]
    assert mod.search_verdict("DeepSeek", found, url, ["dsv4-2"]) == []
    assert nothing["answered"] and nothing["items"] == [] and nothing["meta"] == "No matching documents"
    assert mod.search_verdict("qzxvkjwq", nothing, url, []) == []
    assert (tmp_path / "shot.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_filter_verdict_names_a_wrong_recipe_a_lone_heading_and_missing_notes():
    m = load()
    want = ["recipes/dsv4-flash-8x-h100.html", "recipes/gemma3-270m-h100.html"]
    notes = ["None of GLM-5.2 or Kimi K3 fits one H100 80GB by the planner."]
    good = {"shown": want + want[:1], "orphans": [], "notes": notes}
    assert m.filter_verdict("h100", good, want) == []
    wrong = m.filter_verdict("h100", {**good, "shown": [*want, "recipes/glm52-8.html"]}, want)
    assert wrong == [f"index?hw=h100: the filter shows {sorted([*want, 'recipes/glm52-8.html'])}, not {want}"]
    lone = m.filter_verdict("h100", {**good, "orphans": ["GLM-5.2"]}, want)
    assert lone == ["index?hw=h100: heading(s) with nothing under them: GLM-5.2"]
    assert "no note says which families fit no single h100" in m.filter_verdict("h100", {**good, "notes": []}, want)[0]
    # nothing written for it: the notes must say so and name the nearest
    empty = {"shown": [], "orphans": [], "notes": ["None of GLM-5.2 fits one A100 40GB."]}
    assert "no note says so or what is nearest" in m.filter_verdict("a100-40gb", empty, [])[0]
    said = [*empty["notes"], "No recipe is written for the A100 40GB yet. The nearest: glm52-fp8-8x-a100."]
    assert m.filter_verdict("a100-40gb", {**empty, "notes": said}, []) == []
    assert m.filter_verdict("h100", None, want) == ["index?hw=h100: the probe page got no measurements"]


# A stand-in for the index and its filter script (the real one is docs/assets/cookbook.js): every
# element with data-hw shows only under ?hw= one of its kinds; a note shows under its own kind.
FAKE_INDEX = """<!doctype html><html><head><style>.cb-note {{ display: none }}</style></head><body><article>
<h1>What can I run</h1>
<h2 data-hw="h100 a100-40gb">Intro</h2><p data-hw="h100 a100-40gb">Pick your hardware.</p>
<ul data-hw="h100 a100-40gb"><li>the filter</li></ul>
<h2 data-hw="h100">H100 recipes</h2><p data-hw="h100">intro text</p><table data-hw="h100"><tbody>{rows}</tbody></table>
<h2 data-hw="{glm_hw}">GLM-5.2</h2><p data-hw="{glm_hw}">GLM intro text only</p>
<table data-hw="h200"><tbody><tr><td><a href="recipes/glm52-8.html">glm52-8</a></td></tr></tbody></table>
{stray}
<p class="cb-note" data-hw-note="h100">None of GLM-5.2 or Kimi K3 fits one H100 80GB. Nearest:
 <a href="recipes/gemma3-270m-h200.html">gemma3-270m-h200</a></p>
<p class="cb-note" data-hw-note="{empty}">No recipe is written for it yet; the nearest:
 <a href="recipes/glm52-8.html">glm52-8</a>. None of GLM-5.2 fits one.</p>
</article><script>
var hw = new URLSearchParams(location.search).get("hw");
document.querySelectorAll("[data-hw]").forEach(function (el) {{
  if (el.dataset.hw.split(" ").indexOf(hw) < 0) el.style.display = "none";
}});
document.querySelectorAll(".cb-note").forEach(function (p) {{
  if (p.dataset.hwNote === hw) p.style.display = "block";
}});
</script></body></html>"""


def _filter_site(mod, tmp_path, glm_hw="h200", stray=""):
    """The stand-in index, its H100 rows from the real recipes; `glm_hw` and `stray` spoil it."""
    site = tmp_path / "site"
    site.mkdir(parents=True)
    recipes = mod.Site(None, "", [], tmp_path).recipes()
    rows = "".join(
        f'<tr><td><a href="recipes/{x.slug}.html">{x.slug}</a></td></tr>'
        for x in recipes
        if x.recipe.hardware.platform == "h100"
    )
    page = FAKE_INDEX.format(rows=rows, glm_hw=glm_hw, stray=stray, empty=mod.empty_filter_hw(recipes))
    (site / "index.html").write_text(page, encoding="utf-8")
    return site


@chromium
def test_the_hardware_notes_check_fails_on_a_lone_heading_or_a_wrong_recipe(tmp_path):
    """hardware_notes_check in Chromium on a stand-in index: right as written, it passes (links in
    the notes are not shown recipes; a list under a heading counts); a heading left with only its
    intro text, or another kind's recipe shown, fails it."""
    mod = load()
    assert mod.empty_filter_hw(mod.Site(None, "", [], tmp_path).recipes()) == "a100-40gb"
    out = tmp_path / "shots"
    out.mkdir()
    cases = {
        "good": _filter_site(mod, tmp_path / "good"),
        "lone": _filter_site(mod, tmp_path / "lone", glm_hw="h200 h100"),
        "wrong": _filter_site(
            mod, tmp_path / "wrong", stray='<table data-hw="h100"><tr><td><a href="recipes/glm52-8.html">x</a></table>'
        ),
    }
    failures = {}
    with mod.chromium(mod.browser()) as b:
        for name, site_dir in cases.items():
            with mod.serve(site_dir) as url:
                failures[name] = mod.hardware_notes_check(mod.Site(b, url, [], out))
    assert failures["good"] == [], failures["good"]
    assert failures["lone"] == ["index?hw=h100: heading(s) with nothing under them: GLM-5.2"], failures["lone"]
    assert len(failures["wrong"]) == 1 and "index?hw=h100: the filter shows" in failures["wrong"][0]
    assert "recipes/glm52-8.html" in failures["wrong"][0]
    for hw in ("h100", "a100-40gb"):
        assert (out / f"index-{hw}-1280.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
