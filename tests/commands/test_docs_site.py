"""The docs as a site: what `cookbook docs` generates builds with `mkdocs build --strict`, and
every launch block in the built HTML is exactly what `cookbook launch` prints (and parses as bash).

The pages are generated into a temporary docs_dir (not read from docs/, which
test_docs_are_up_to_date holds to the generator), built with the repository's mkdocs.yml.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]


class Blocks(HTMLParser):
    """Each <pre>'s text, keyed by the id and by the text of the last heading before it; every href."""

    def __init__(self):
        super().__init__()
        self.heading: str | None = None
        self.blocks: dict[str, list[str]] = {}
        self.by_title: dict[str, list[str]] = {}
        self.hrefs: list[str] = []
        self.srcs: list[str] = []
        self._pre: list[str] | None = None
        self._title: list[str] | None = None
        self.title = ""

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if re.fullmatch(r"h[1-6]", tag) and attrs.get("id"):
            self.heading, self._title = attrs["id"], []
        elif tag == "summary":  # a collapsed part's title (pymdownx.details)
            self._title = []
        elif tag == "pre":
            self._pre = []
        elif tag == "a" and attrs.get("href"):
            self.hrefs.append(attrs["href"])
        elif tag == "img" and attrs.get("src"):
            self.srcs.append(attrs["src"])

    def handle_endtag(self, tag):
        if tag == "pre" and self._pre is not None:
            self.blocks.setdefault(self.heading or "", []).append("".join(self._pre))
            self.by_title.setdefault(self.title, []).append("".join(self._pre))
            self._pre = None
        elif (re.fullmatch(r"h[1-6]", tag) or tag == "summary") and self._title is not None:
            self.title, self._title = "".join(self._title).replace("\u00b6", "").strip(), None

    def handle_data(self, data):
        if self._pre is not None:
            self._pre.append(data)
        if self._title is not None:
            self._title.append(data)


def parse(path: Path) -> Blocks:
    p = Blocks()
    p.feed(path.read_text(encoding="utf-8"))
    return p


def build(docs_dir: Path, site_dir: Path) -> subprocess.CompletedProcess:
    """`mkdocs build --strict` of `docs_dir` with the repository's mkdocs.yml (its docs_dir replaced)."""
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config["docs_dir"] = str(docs_dir)
    config["site_dir"] = str(site_dir)
    config["hooks"] = [str(ROOT / h) for h in config.get("hooks", [])]  # relative to the config file
    cfg = docs_dir.parent / "mkdocs.yml"
    cfg.write_text(yaml.safe_dump(config), encoding="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(cfg)],
        capture_output=True,
        text=True,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": "/usr/bin:/bin"},
    )


def generate(docs_dir: Path) -> dict[Path, str]:
    from cookbook.site.pages import pages

    out = {}
    for path, text in pages().items():
        rel = path.relative_to(ROOT / "docs")
        (docs_dir / rel).parent.mkdir(parents=True, exist_ok=True)
        (docs_dir / rel).write_text(text, encoding="utf-8")
        out[rel] = text
    hand = Path("assets") / "cookbook.js"  # the one hand-written asset: the index's filter script
    (docs_dir / hand).write_text((ROOT / "docs" / hand).read_text(encoding="utf-8"), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    base = tmp_path_factory.mktemp("site")
    generate(base / "docs")
    p = build(base / "docs", base / "site")
    assert p.returncode == 0, f"mkdocs build --strict failed:\n{p.stdout}\n{p.stderr}"
    return base / "site"


def recipe_slugs() -> list[str]:
    from cookbook.recipe.resolve import all_slugs, resolve

    return [s for s in all_slugs() if not resolve(s, check=False).recipe.abstract]


def launch_output(slug: str, *args: str) -> str:
    from cookbook.cli import main

    result = CliRunner().invoke(main, ["launch", slug, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_site_builds_strict_and_has_a_page_per_recipe(site):
    for slug in recipe_slugs():
        assert (site / "recipes" / f"{slug}.html").is_file(), slug


@pytest.mark.parametrize("slug", recipe_slugs())
def test_the_launch_block_in_the_html_is_what_cookbook_launch_prints(site, slug):
    page = parse(site / "recipes" / f"{slug}.html")
    assert "launch" in page.blocks, f"{slug}.html has no code block under its Launch heading"
    block = page.blocks["launch"][0]
    assert block.rstrip("\n") == launch_output(slug).rstrip("\n")
    p = subprocess.run(["bash", "-n"], input=block, capture_output=True, text=True)
    assert p.returncode == 0, f"{slug}: the launch block does not parse as bash: {p.stderr}"


def test_each_offered_quant_block_is_what_cookbook_launch_quant_prints(site):
    """The `--quant Q` blocks under Launch: `cookbook launch SLUG --quant Q`, for every quant that resolves there."""
    from cookbook.recipe.errors import RecipeError
    from cookbook.recipe.resolve import resolve

    checked = 0
    for slug in recipe_slugs():
        page = parse(site / "recipes" / f"{slug}.html")
        default = resolve(slug).quant
        for quant in resolve(slug).recipe.quants:
            if quant == default:
                continue
            try:
                resolve(slug, quant=quant)
            except RecipeError:
                assert f"--quant {quant}" not in page.by_title, f"{slug}: a refused quant has a launch block"
                continue
            blocks = page.by_title.get(f"--quant {quant}")
            assert blocks, f"{slug}.html has no block under '--quant {quant}'"
            assert blocks[0].rstrip("\n") == launch_output(slug, "--quant", quant).rstrip("\n")
            checked += 1
    assert checked, "no recipe offers a second quant that resolves; this test checks nothing"


def test_the_index_links_every_recipe_page(site):
    hrefs = set(parse(site / "index.html").hrefs)
    missing = [s for s in recipe_slugs() if f"recipes/{s}.html" not in hrefs]
    assert not missing, f"index.html does not link: {missing}"


def test_every_comparison_page_links_its_recipes(site):
    pages = sorted((site / "compare").glob("*.html"))
    assert pages, "no comparison page was built"
    for page in pages:
        linked = {h for h in parse(page).hrefs if h.startswith("../recipes/")}
        assert len(linked) >= 2, f"{page.name} compares fewer than two recipes"
        for href in linked:
            assert (page.parent / href).resolve().is_file(), f"{page.name} links {href}, which was not built"


def test_a_broken_link_fails_the_strict_build(tmp_path):
    generate(tmp_path / "docs")
    (tmp_path / "docs" / "broken.md").write_text("# Broken\n\n[nowhere](recipes/no-such-recipe.md)\n")
    p = build(tmp_path / "docs", tmp_path / "site")
    assert p.returncode != 0
    assert "no-such-recipe.md" in p.stdout + p.stderr


def test_a_tampered_launch_block_is_caught(site, tmp_path):
    """The extraction reads the block itself: one changed flag no longer equals `cookbook launch`."""
    slug = "gemma3-270m-cpu"
    html = (site / "recipes" / f"{slug}.html").read_text(encoding="utf-8")
    at = html.index("max-num-seqs", html.index('id="launch"'))  # inside the launch block's <pre>
    tampered = tmp_path / "t.html"
    tampered.write_text(html[:at] + "max-num-seqz" + html[at + len("max-num-seqs") :], encoding="utf-8")
    assert parse(tampered).blocks["launch"][0].rstrip("\n") != launch_output(slug).rstrip("\n")


def test_the_gaudi_page_shows_its_bucket_file_as_the_repository_holds_it(site):
    from cookbook.recipe.resolve import resolve

    gaudi = [s for s in recipe_slugs() if "VLLM_BUCKETING_FROM_FILE" in resolve(s).recipe.env]
    assert gaudi, "no recipe names a bucket file"
    for slug in gaudi:
        path = str(resolve(slug).recipe.env["VLLM_BUCKETING_FROM_FILE"].value)
        held = (ROOT / path[path.index("ports/") :]).read_text(encoding="utf-8")
        blocks = parse(site / "recipes" / f"{slug}.html").blocks.get("buckets")
        assert blocks and blocks[0].rstrip("\n") == held.rstrip("\n")


def test_pages_render_only_what_the_recipe_states(tmp_path):
    """No None, null or empty table cell stands in for a fact the recipe does not have."""
    for rel, text in generate(tmp_path / "docs").items():
        if rel.suffix != ".md":
            continue
        for n, line in enumerate(text.splitlines(), 1):
            if not line.startswith("|"):  # tables only (the `show` block is its own text)
                continue
            if rel.name != "index.md" and line != "| | |":  # the matrix leaves a cell empty where no recipe is
                assert not re.search(r"\|\s*\|\s*$", line), f"{rel}:{n}: an empty last cell: {line}"
            assert not re.search(r"\|\s*(None|null)\s*\|", line), f"{rel}:{n}: {line}"
            assert "`None`" not in line and "`null`" not in line, f"{rel}:{n}: {line}"


def test_a_comparison_lines_up_each_variants_own_value():
    from cookbook.recipe.resolve import all_slugs
    from cookbook.site.compare import compare_page, groups

    _, compared = groups(all_slugs())
    members = compared["glm52-base"]
    page = compare_page("glm52-base", members)
    row = next(line for line in page.splitlines() if line.startswith("| `--tensor-parallel-size` |"))
    cells = [c.strip() for c in row.strip("|").split("|")][1:]
    assert cells == [f"`{m.recipe.serve.args['tensor_parallel_size'].value}`" for m in members]
    assert "| `--block-size` |" not in page, "a setting every variant shares is not a difference"


def test_the_index_matrix_shows_each_recipes_status(site):
    from cookbook.evidence.status import shown_status, status_of
    from cookbook.recipe.resolve import resolve

    html = (site / "index.html").read_text(encoding="utf-8")
    for slug in recipe_slugs():
        r = resolve(slug, check=False)
        status = shown_status(r, status_of(r))  # as `cookbook list` prints it: the engine check beside
        pattern = rf'href="recipes/{re.escape(slug)}\.html">{re.escape(slug)}</a>\s*<span class="cb-status cb-\w+">([^<]*)</span>'
        found = re.search(pattern, html)
        assert found, f"index.html: no status badge beside {slug}"
        assert found.group(1) == status, f"{slug}: badge {found.group(1)!r}, status {status!r}"


def test_an_engine_checked_recipe_says_so_on_the_index_and_its_page(site):
    from cookbook.evidence import engine_check as E
    from cookbook.recipe.resolve import resolve

    html = (site / "index.html").read_text(encoding="utf-8")
    # Which recipes are engine-checked today changes as runs go stale and are made again (issue 64
    # item 4 made the runs before the file hash stale); each badge is the status list's, as above.
    for r in (x for x in map(resolve, recipe_slugs()) if E.bundles(x)):
        word, _ = E.status(r)
        assert f"; {word}</span>" in html or f">{word}</span>" in html, (r.slug, word)
    checked = [r for r in map(resolve, recipe_slugs()) if E.bundles(r)]
    assert len(checked) >= 3
    for r in checked:
        word, _ = E.status(r)
        page = (site / "recipes" / f"{r.slug}.html").read_text(encoding="utf-8")
        assert f"Engine check: <em>{word}</em>" in page, r.slug
        assert f"recipes/{r.slug}/evidence/engine-check/{E.bundles(r)[-1].name}/" in page
        assert "does not prove quality" in page
    plain = (site / "recipes" / "glm52-2.html").read_text(encoding="utf-8")
    assert "Engine check:" not in plain  # no bundle, no paragraph


def test_a_verified_recipe_page_plots_its_measured_sweep_from_the_bundle(site):
    """The plot's points are the bundle's sweep; the page links it and the build drew it (SVG)."""
    import json
    import xml.etree.ElementTree as ET

    from cookbook.recipe.resolve import resolve
    from cookbook.site.plots import plots_of

    resolved = resolve("gemma3-270m-cpu")
    r = resolved.recipe
    sweep = json.loads((ROOT / r.verified.bundle / "results.json").read_text())["gates"]["speed"]["measured"]["sweep"]
    plot = plots_of(resolved)["measured"]
    assert plot.measured and plot.title.startswith("Measured here")
    assert plot.lines[0][1] == [(row["concurrency"], row["output_throughput"]) for row in sweep]
    assert len(sweep) >= 2
    assert "../plots/gemma3-270m-cpu-measured.svg" in parse(site / "recipes" / "gemma3-270m-cpu.html").srcs
    svg = (site / "plots" / "gemma3-270m-cpu-measured.svg").read_text(encoding="utf-8")
    ET.fromstring(svg)  # well-formed
    assert "Measured here" in svg and "concurrent requests" in svg


def test_reported_throughput_tables_are_plotted_as_reported_one_line_per_row(site):
    from cookbook.recipe.resolve import resolve
    from cookbook.site.plots import plots_of

    resolved = resolve("glm52-2")
    rep = resolved.recipe.reported[0]
    assert rep.columns[:2] == ["hardware", "c1"], "the headline table this test reads moved"
    plot = plots_of(resolved)["reported-0"]
    assert not plot.measured and plot.title.startswith("Reported, not measured here")
    assert [label for label, _ in plot.lines] == [row[0] for row in rep.rows]
    first = rep.rows[0]
    assert plot.lines[0][1] == [(int(c.lstrip("c")), float(v)) for c, v in zip(rep.columns[1:], first[1:])]
    # a figure not reported is left out, not drawn as zero
    gaps = [row for row in rep.rows if None in row]
    for row in gaps:
        line = dict(plot.lines)[row[0]]
        assert len(line) == sum(v is not None for v in row[1:])
    svg = (site / "plots" / "glm52-2-reported-0.svg").read_text(encoding="utf-8")
    assert "Reported, not measured here" in svg


def test_a_reported_table_that_is_not_throughput_by_concurrency_has_no_plot():
    from types import SimpleNamespace

    from cookbook.site.plots import reported_lines

    rep = SimpleNamespace(columns=["gate", "result"], rows=[["greedy", "passed"], ["tools", "32/32"]])
    assert reported_lines(rep) == ([], "")
    rep = SimpleNamespace(columns=["hardware", "c1", "c4"], rows=[["2x", "fast", None]])
    assert reported_lines(rep)[0] == []


def check_site():
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader("check_site", str(ROOT / "scripts" / "check-site"))
    spec = importlib.util.spec_from_loader("check_site", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("slug", recipe_slugs())
def test_every_recipe_page_has_its_sections_in_the_users_order(site, slug):
    """The sections check-site requires (those the recipe has data for), in order, and nothing
    shows an unfilled {dotted.key} placeholder."""
    cs = check_site()
    html = (site / "recipes" / f"{slug}.html").read_text(encoding="utf-8")
    ids = [i for i in re.findall(r'<h2 id="([^"]+)"', html) if i in {sid for sid, _ in cs.SECTIONS}]
    assert ids == cs.expected_sections(slug)
    text = re.sub(r"<[^>]+>", " ", html[html.index("<article") : html.index("</article>")])
    assert not cs.PLACEHOLDER.findall(text), f"{slug}: unfilled placeholders"


def test_the_make_image_line_on_every_page_is_what_the_cli_builds(site):
    """`make image RECIPE=slug` runs `cookbook image slug` (the Makefile), and the tag the page
    names is the one `cookbook image slug --dry-run` prints; a recipe no port builds says why."""
    from cookbook.cli import main

    make = subprocess.run(
        # as a user types it: not inside `make test`'s own make (whose MAKEFLAGS/MAKELEVEL would
        # add "Entering directory" lines)
        ["make", "--no-print-directory", "-n", "image", "RECIPE=gemma3-270m-cpu"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")},
    ).stdout.splitlines()
    assert make and make[-1].split()[-2:] == ["image", "gemma3-270m-cpu"] and "cookbook" in make[-1]
    checked = 0
    for slug in recipe_slugs():
        page = parse(site / "recipes" / f"{slug}.html")
        dry = CliRunner().invoke(main, ["image", slug, "--dry-run"])
        blocks = page.blocks.get("build-or-get-the-image")
        if dry.exit_code != 0:
            assert not blocks, f"{slug}: a make image line for an image the CLI refuses"
            continue
        tag = next(ln.split()[-1] for ln in dry.output.splitlines() if ln.startswith("# image "))
        first = blocks[0].splitlines()[0]
        assert first.split("#")[0].strip() == f"make image RECIPE={slug}"
        assert first.split("# tags ")[1].strip() == tag, slug
        checked += 1
    assert checked >= 10


def test_multi_node_is_collapsed_and_only_where_the_gpu_count_can_span_nodes(site):
    from cookbook.recipe.resolve import resolve

    for slug in recipe_slugs():
        r = resolve(slug).recipe
        html = (site / "recipes" / f"{slug}.html").read_text(encoding="utf-8")
        spans = r.hardware.platform != "cpu" and r.hardware.gpus > 4
        assert ('id="multi-node"' in html) == spans, slug
        if spans and "is refused" not in html[html.index('id="multi-node"') :][:2000]:
            part = html[html.index('id="multi-node"') :]
            assert "<details" in part and "runtime mp" in part, f"{slug}: multi-node blocks not collapsed"


def test_source_notes_are_readable_sections_with_their_line_structure(site, tmp_path):
    from cookbook.recipe.resolve import resolve
    from cookbook.site.recipe_page import note_body, note_title

    page = parse(site / "recipes" / "glm52-8.html")
    notes = resolve("glm52-8").recipe.docs
    assert "run_glm_optimized_flags" in notes
    assert "Run glm optimized flags" in page.by_title and "run_glm_optimized_flags" not in page.by_title
    # aligned lines (a flag table) keep every line, as written
    shown = page.by_title["Run glm optimized flags"][0]
    assert shown.rstrip("\n").splitlines() == [
        ln.rstrip() for ln in notes["run_glm_optimized_flags"].strip().splitlines()
    ]
    assert note_title("quick_start") == "Quick start"
    # prose keeps its line breaks; a sentence wrapped in the source is one line; markup is text
    body = note_body("First line.\nSecond line, wrapped\nin the source.\n- item <b>x</b>")
    assert body == ["First line.<br>", "Second line, wrapped in the source.", "", "- item &lt;b&gt;x&lt;/b&gt;"]


def test_talk_to_it_names_the_served_model_and_the_parsers_fields():
    from cookbook.recipe.resolve import resolve
    from cookbook.site.talk import talk_lines

    glm = "\n".join(talk_lines(resolve("glm52-8")))
    assert '"model": "GLM-5.2-Vision"' in glm and 'model="GLM-5.2-Vision"' in glm
    assert ".message.reasoning" in glm and '"content": null' in glm and "finish_reason" in glm
    assert "tool_calls" not in glm  # glm52-8 sets no tool parser
    fp8 = "\n".join(talk_lines(resolve("glm52-fp8-8x-h200")))
    assert "--tool-call-parser glm47" in fp8 and "tool_calls" in fp8 and ".message.reasoning" in fp8
    # the packaged Gemma 3 270M is a base model: completions, and the page says so (issue 63, item 4)
    for slug in ("gemma3-270m-cpu", "gemma3-270m-cpu-avx2", "gemma3-270m-h200"):
        gemma = "\n".join(talk_lines(resolve(slug)))
        assert "is a base model" in gemma and "/v1/completions" in gemma and "client.completions.create(" in gemma
        assert "/v1/chat/completions" not in gemma and "chat.completions" not in gemma and "tool_calls" not in gemma


def test_the_index_groups_by_family_with_h100_and_h200_columns_and_sets_benchmarks_apart(site):
    from cookbook.recipe.resolve import resolve
    from cookbook.site.markdown import benchmark_reason

    html = (site / "index.html").read_text(encoding="utf-8")
    html = html[html.index("<article") : html.index("</article>")]  # not the navigation
    matrices, rest = html.split('id="benchmark-only-recipes"', 1)
    tables = re.findall(r"<table>.*?</table>", matrices, re.S)
    assert len(tables) >= 4
    for table in tables:
        head = table[: table.index("</thead>")]
        assert 'data-hw="h100"' in head and 'data-hw="h200"' in head
    bench = [s for s in recipe_slugs() if benchmark_reason(resolve(s, check=False).recipe)]
    assert bench, "no benchmark-only recipe: this test checks nothing"
    for slug in recipe_slugs():
        in_matrix = f'href="recipes/{slug}.html"' in matrices
        assert in_matrix != (slug in bench), slug
    benchmarks = rest.split('id="every-recipe"', 1)[0]
    assert all(f'href="recipes/{s}.html"' in benchmarks for s in bench)
    # the filter: hidden until its script runs, an option per hardware kind, the script loaded
    assert re.search(r'<div class="cb-filter" id="cb-filter" hidden>', html)
    assert '<option value="h100">' in html and '<option value="h200">' in html
    page = (site / "index.html").read_text(encoding="utf-8")
    assert "assets/cookbook.js" in page and (site / "assets" / "cookbook.js").is_file()


def test_benchmark_only_is_the_recipes_field_else_its_dummy_weights():
    from types import SimpleNamespace

    from cookbook.site.markdown import benchmark_reason

    def recipe(why=None, load_format=None):
        args = {"load_format": SimpleNamespace(value=load_format)} if load_format else {}
        return SimpleNamespace(gates=SimpleNamespace(benchmark_only=why), serve=SimpleNamespace(args=args))

    assert benchmark_reason(recipe("random   weights\n here")) == "random weights here"
    assert "--load-format dummy" in benchmark_reason(recipe(load_format="dummy"))
    assert benchmark_reason(recipe(load_format="auto")) is None
    assert benchmark_reason(recipe()) is None


def test_what_not_to_do_quotes_each_refusal_with_the_recipes_values():
    from cookbook.recipe.resolve import resolve
    from cookbook.site.recipe_page import filled, rule_lines

    resolved = resolve("glm52-8")
    text = "\n".join(rule_lines(resolved))
    gpus = resolved.recipe.hardware.gpus
    assert f"use a TP size that divides {gpus}" in text and "{hardware.gpus}" not in text
    assert "{" not in filled("a {no.such.key} and {hardware.gpus}", {"hardware": {"gpus": 8}})
    assert filled("a {no.such.key} and {hardware.gpus}", {"hardware": {"gpus": 8}}) == "a not set and 8"


@pytest.mark.parametrize("slug", ["glm52-8", "glm52-mxfp4-8x-gaudi2", "gemma3-270m-h200"])
def test_will_it_fit_shows_the_planners_own_figures(slug):
    from cookbook.plan.budget import make_plan
    from cookbook.plan.render import as_text
    from cookbook.recipe.resolve import resolve
    from cookbook.site.plan_section import plan_lines
    from cookbook.units import GIB

    resolved = resolve(slug)
    p = make_plan(resolved)
    text = "\n".join(plan_lines(resolved))
    assert f"| weights | {p.weights_per_gpu_bytes / GIB:,.2f} GiB" in text
    assert f"| left after weights | {p.left_after_weights_bytes / GIB:,.2f} GiB |" in text
    assert f"| KV pool | {p.pool_bytes / GIB:,.2f} GiB" in text
    if p.max_ctx_at_seqs > 0:
        assert f"| largest context at {p.setup.max_num_seqs} sequences | {p.max_ctx_at_seqs:,} tokens" in text
    # the whole plan, collapsed, is what `cookbook plan` prints
    assert all(("    " + ln).rstrip() in text.splitlines() for ln in as_text(p).rstrip().splitlines())
