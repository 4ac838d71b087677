"""Every text a recipe quotes from a seed document is in that seed (issue 65).

A quotation is a span in quotes ('...', "...", ‘...’, “...”) inside any string of a recipe file,
attributed to the seed the string names before it ("SlimServe README" is seed 000, "GLM-5.2 NVFP4
README" 001, "GLM-5.2 (MXFP4)" 002), or, naming none, to the seed its setting's `source` names.
Whitespace, typographic quotes and line breaks inside brackets are normalized; "..." inside a quote
elides, so each part must be there, in order. The seeds are read from ../shared/seeds (or
$COOKBOOK_SEEDS); without them the test skips and says so."""

import re

import pytest
import yaml
from seed_common import ROOT

SEED_OF = {"SlimServe README": "000", "GLM-5.2 NVFP4 README": "001", "GLM-5.2 (MXFP4)": "002"}
QUOTE = re.compile(r"(?:^|(?<=[\s(\[:,—]))['‘“\"]([^'’”\"\n]{8,}?)['’”\"](?=[\s).,;:\]—]|$)")
RECIPES = sorted(p.parent.name for p in (ROOT / "recipes").glob("*/recipe.yaml"))


def norm(s: str) -> str:
    s = s.replace("’", "'").replace("‘", "'").replace("“", '"').replace("”", '"').replace("…", "...")
    s = re.sub(r"\s+", " ", s).strip()
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", s))


def strings(node, path, source=None):
    """(key path, text, the nearest `source` naming where it comes from) of every string."""
    if isinstance(node, dict):
        src = node["source"] if isinstance(node.get("source"), str) else source
        for k, v in node.items():
            yield from strings(v, f"{path}.{k}", src)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from strings(v, f"{path}.{i}", source)
    elif isinstance(node, str):
        yield path, node, source


def quotations(slug: str):
    """(key path, seed id, quoted text) of every quotation a recipe attributes to a seed."""
    data = yaml.safe_load((ROOT / "recipes" / slug / "recipe.yaml").read_text(encoding="utf-8"))
    for path, text, source in strings(data, slug):
        named = [(text.find(name), seed) for name, seed in SEED_OF.items() if name in text]
        for m in QUOTE.finditer(text):
            before = [(i, seed) for i, seed in named if i < m.start()]
            seed = max(before)[1] if before else next((s for n, s in SEED_OF.items() if source and n in source), None)
            if seed is not None:
                yield path, seed, norm(m.group(1))


def found(quote: str, text: str) -> bool:
    at = 0
    for part in (p.strip() for p in quote.split("...") if p.strip()):
        at = text.find(part, at)
        if at < 0:
            return False
        at += len(part)
    return True


@pytest.mark.parametrize("slug", RECIPES)
def test_every_quotation_is_in_its_seed(slug, seed_text):
    texts = {seed: norm(seed_text(seed)) for seed in SEED_OF.values()}
    bad = [f"{path}: seed {seed} has no {q!r}" for path, seed, q in quotations(slug) if not found(q, texts[seed])]
    assert bad == [], "\n".join(bad)


def test_the_quotations_are_found_at_all():
    """The extraction sees the quotations the seed recipes make (a regex that matched nothing would pass)."""
    got = {q for slug in RECIPES for _, _, q in quotations(slug)}
    assert "Draft acceptance on natural text runs 25–33% of draft tokens" in got
    assert "Individual cells carry a few percent of run-to-run variance" in got
    assert len(got) >= 25


def test_a_misquote_is_caught(seed_text):
    """k3-base's reasoning_split once quoted seed 000 with kimi_k2 where the document says deepseek_v4."""
    text = norm(seed_text("000"))
    assert not found(
        "--reasoning-parser kimi_k2 overrides the GLM default, which would otherwise return every answer "
        "as reasoning with content: null",
        text,
    )
    assert found("--reasoning-parser deepseek_v4 overrides the GLM default", text)
    assert found("No valid ... FLASHMLA", "No valid attention backend found ... FLASHMLA_SPARSE")
    assert not found("FLASHMLA ... No valid", "No valid attention backend found ... FLASHMLA_SPARSE")
