"""docs/recipes/<slug>.md: summary, fetching, converting, launch (every offered quant),
multi-node, buckets, fixes, gates, performance, what not to do, every setting and why."""

from __future__ import annotations

from cookbook.errors import CookbookError
from cookbook.evidence.status import status_of, verified_status
from cookbook.plan.launch_block import launch_block
from cookbook.recipe import multinode, paths
from cookbook.recipe.errors import RecipeError
from cookbook.recipe.resolve import resolve
from cookbook.recipe.rules import PLACEHOLDER
from cookbook.recipe.show import render_show
from cookbook.site.compare import family_root
from cookbook.site.evidence import gate_lines, performance_lines
from cookbook.site.fix_section import fix_section
from cookbook.site.markdown import MARKER, badge, cell, code, engine_pin, front_matter, hardware_label, value_text


def _arg(r, key):
    s = r.serve.args.get(key)
    return None if s is None else s.value


def summary_rows(resolved, slug: str) -> list[tuple[str, str]]:
    """The summary table: only what the recipe states."""
    r = resolved.recipe
    rows = [("model", f"{r.model.name} ({code(r.model.source.repo)}, {r.model.format})")]
    rows.append(("hardware", hardware_label(r)))
    rows.append(("engine", code(engine_pin(r))))
    if r.image.base:
        rows.append(("base image", code(r.image.base)))
    if r.image.port:
        rows.append(("port", code(f"ports/{r.image.port}/")))
    precision = []
    if resolved.quant:
        offered = ", ".join(q for q in r.quants if q != resolved.quant)
        precision.append(f"quant {code(resolved.quant)}" + (f" (also offered: {offered})" if offered else ""))
    for key, label in (("quantization", "quantization"), ("dtype", "dtype"), ("kv_cache_dtype", "KV cache")):
        if (v := _arg(r, key)) is not None:
            precision.append(f"{label} {code(value_text(v))}")
    if precision:
        rows.append(("precision / quant", "; ".join(precision)))
    if (ctx := _arg(r, "max_model_len")) is not None:
        native = r.model.architecture.native_context_tokens
        rows.append(("context", f"{ctx:,} tokens" + (f" ({native:,} native)" if native else "")))
    if (seqs := _arg(r, "max_num_seqs")) is not None:
        rows.append(("concurrency", f"{seqs} sequences (`--max-num-seqs`)"))
    parsers = [
        f"{label} {code(value_text(v))}"
        for key, label in (("reasoning_parser", "reasoning"), ("tool_call_parser", "tools"))
        if (v := _arg(r, key)) is not None
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
    lines = ["## Fetching the checkpoint", ""]
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
    return lines


def convert_lines(r) -> list[str]:
    if not r.convert:
        return []
    lines = ["## Converting the checkpoint", ""]
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
    lines = ["## Buckets", "", f"`VLLM_BUCKETING_FROM_FILE={text}`", ""]
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


def multinode_lines(resolved) -> list[str]:
    """Multi-GPU recipes: the blocks of a two-node launch on each runtime, and which node counts split."""
    r = resolved.recipe
    if r.hardware.gpus < 2 or r.hardware.platform == "cpu":
        return []
    slug = resolved.slug
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    lines = ["## Multi-node", ""]
    try:
        lay = multinode.layout(resolved, 2)
    except CookbookError as exc:
        return lines + [f"`cookbook launch {slug} --nodes 2` is refused: {exc.format_message()}", ""]
    lines += [
        f"The same recipe split over two nodes ({lay.describe()}). Node 0 is the head and serves the API; "
        "export `HEAD_ADDR` (the head's address, reachable from every node) on each node first, "
        "or pass `--head-addr`. One node's block alone: `--node-rank R`.",
        "",
    ]
    runtimes = (
        ("mp", "vLLM's own runtime", "--data-parallel-* flags" if lay.dp > 1 else "--nnodes / --node-rank"),
        ("ray", "Ray", "a Ray cluster, one server on the head"),
    )
    for runtime, title, what in runtimes:
        lines += [f"### {title} ({what})", "", f"`cookbook launch {slug}{quant} --nodes 2 --runtime {runtime}`:", ""]
        lines += ["```bash", launch_block(resolved, nodes=2, runtime=runtime).rstrip(), "```", ""]
    lines += [
        "### Kubernetes (LeaderWorkerSet)",
        "",
        f"`cookbook launch {slug}{quant} --nodes 2 --runtime lws` (`--image` names the serving image):",
        "",
        "```yaml",
        launch_block(resolved, nodes=2, runtime="lws").rstrip(),
        "```",
        "",
    ]
    other = []
    for nodes in (n for n in (3, 4, 8) if n <= lay.world):
        try:
            other.append(f"{nodes} ({multinode.layout(resolved, nodes).describe()})")
        except CookbookError as exc:
            other.append(f"not {nodes}: {exc.format_message().split(': ', 1)[1]}")
    if other:
        lines += ["Other node counts: " + "; ".join(other) + ".", ""]
    return lines


def template(text: str) -> str:
    """A rule's message or help for a list: its {dotted.key} placeholders as code."""
    return PLACEHOLDER.sub(lambda m: f"`{{{m.group(1)}}}`", cell(text))


def rule_lines(r) -> list[str]:
    if not r.rules:
        return []
    lines = ["## What not to do", ""]
    lines += [
        "Each is a rule the recipe enforces: `cookbook launch` (and `show`, `lint`, `serve`) refuses with its "
        "message, where each `{dotted.key}` is filled in with the value that broke the rule.",
        "",
    ]
    for rule in r.rules:
        test = (
            rule.when
            if rule.kind == "conflict"
            else f"{rule.require}" + ("" if rule.when == "true" else f" (when {rule.when})")
        )
        lines += [f"- **{rule.id}**: {template(rule.message)}"]
        extra = [f"{'refused when' if rule.kind == 'conflict' else 'requires'} {code(test)}"]
        if rule.help:
            extra.append(f"instead: {template(rule.help)}")
        if rule.source:
            extra.append(f"source: {cell(rule.source)}")
        lines += ["    " + "; ".join(extra) + "."]
    lines.append("")
    return lines


def known_issue_lines(r) -> list[str]:
    if not r.known_issues:
        return []
    return ["## Known issues", ""] + [f"- {cell(k)}" for k in r.known_issues] + [""]


def recipe_page(slug: str) -> str:
    resolved = resolve(slug)
    r = resolved.recipe
    status = status_of(resolved)
    lines = [
        *front_matter(slug),
        MARKER,
        f"# {r.name}",
        "",
        r.summary,
        "",
        f"Status: {badge(status)}. Recipe: `recipes/{slug}/recipe.yaml`.",
        "",
        "| | |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v} |" for k, v in summary_rows(resolved, slug)]
    lines.append("")
    if (base := family_root(resolved)) is not None:
        lines += [f"Compare with the other variants of `{base}`: [{base}](../compare/{base}.md).", ""]
    lines += fetch_lines(resolved)
    lines += convert_lines(r)
    lines += [
        "## Launch",
        "",
        "Paste as printed (generated by `cookbook launch " + slug + "`):",
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
        lines += [f"### --quant {quant}", "", "```bash", launch_block(other).rstrip(), "```", ""]
        if other.recipe.convert and other.recipe.convert != r.convert:
            lines += [f"Before launching `--quant {quant}`, convert its checkpoint:", ""]
            lines += [
                "```bash",
                *(" ".join(["cookbook convert", step.tool, *step.args]) for step in other.recipe.convert),
                "```",
                "",
            ]
    lines += multinode_lines(resolved)
    lines += bucket_lines(r)
    lines += fix_section(r)
    lines += gate_lines(resolved, status)
    lines += performance_lines(r)
    lines += rule_lines(r)
    lines += known_issue_lines(r)
    lines += [
        "## Every setting and why",
        "",
        "```text",
        render_show(resolved, verified_status(resolved.path)).rstrip(),
        "```",
        "",
    ]
    for title, text in r.docs.items():
        lines += [f"## {title}", "", text.rstrip(), ""]
    return "\n".join(lines)
