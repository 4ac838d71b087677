"""needles: random 7-digit codes hidden at set depths in natural prose; substring scoring.

The prompt is sized with the served model's own tokenizer (/tokenize with the chat
template applied) to land within 90-100% of each target length. Needles go in at sentence
boundaries; the first at the declared depth, further ones spaced evenly after it.
"""

from __future__ import annotations

import random
import re

from cookbook.gates import data as gate_data
from cookbook.gates.client import bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.gates.result import GateFailure
from cookbook.recipe.gates_spec.needles import NeedlesGate

KEYS = [
    "amber harbour",
    "silent orchard",
    "copper lantern",
    "northern meadow",
    "velvet compass",
    "hidden ladder",
    "marble window",
    "distant thunder",
    "silver pocket",
    "quiet anchor",
    "timber saddle",
    "scarlet pebble",
    "frozen garden",
    "golden whistle",
    "ancient market",
    "pale candle",
]

FORMULAS = {
    "found_fraction": "codes found / codes hidden over all prompts; found = the code appears as a "
    "substring of the response content (case-insensitive)",
    "prompt_tokens": "len(/tokenize(messages, add_generation_prompt=True)) of the final prompt "
    "(completion mode: len(/tokenize(prompt)))",
    "echoed": "the response repeats 8+ consecutive words of the haystack; such a response finds no code",
}


def needle_sentence(key: str, code: str) -> str:
    return f"The special magic number for the {key} is {code}."


# A needle sentence as it stands in a recorded prompt: (key, code).
NEEDLE = re.compile(r"The special magic number for the ([a-z ]+?) is (\d{7})\.")


def question(keys: list[str]) -> str:
    if len(keys) == 1:
        return (
            f"What is the special magic number for the {keys[0]} mentioned in the text above? "
            "Answer with the number only."
        )
    return (
        "What are the special magic numbers for "
        + ", ".join(f"the {k}" for k in keys)
        + " mentioned in the text above? Answer with each key and its number."
    )


def needle_positions(n_sentences: int, depth_pct: float, count: int) -> list[int]:
    """Sentence indices (insertion points) for `count` needles: first at depth, rest spaced to the end."""
    step = (100.0 - depth_pct) / count
    return [min(n_sentences, round(n_sentences * (depth_pct + i * step) / 100.0)) for i in range(count)]


def depth_sets(cfg: NeedlesGate) -> list:
    """The depth of each prompt at one length: each of depths_pct, or (codes_at_depths) one tuple of them all."""
    return [tuple(cfg.depths_pct)] if cfg.codes_at_depths else list(cfg.depths_pct)


def depth_tag(depth) -> str:
    return "+".join(f"{d:g}" for d in depth) if isinstance(depth, tuple) else f"{depth}"


def build_haystack(sents: list[str], needles: list[str], depth_pct) -> str:
    """The sentences with the needles inserted: from one depth on, or one at each depth of a tuple."""
    out = list(sents)
    if isinstance(depth_pct, tuple):
        positions = [min(len(sents), round(len(sents) * d / 100.0)) for d in depth_pct]
    else:
        positions = needle_positions(len(sents), depth_pct, len(needles))
    for pos, needle in sorted(zip(positions, needles), reverse=True):
        out.insert(pos, needle)
    return " ".join(out)


ECHO_WORDS = 8


def _ngrams(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    words = re.findall(r"\w+", text.lower())
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def echoes(content: str, haystack_without_needles: str) -> bool:
    """True when the response repeats 8+ consecutive words of the haystack (not of a needle)."""
    return bool(_ngrams(content) & _ngrams(haystack_without_needles))


def score(content: str | None, codes: list[str], haystack_without_needles: str = "") -> dict:
    """Codes found as case-insensitive substrings; a response that echoes the haystack finds none
    (a model that parrots its prompt would otherwise 'find' every code)."""
    text = (content or "").lower()
    echoed = bool(haystack_without_needles) and echoes(text, haystack_without_needles)
    found = [] if echoed else [c for c in codes if c.lower() in text]
    return {"codes": codes, "found": found, "found_count": len(found), "echoed": echoed}


def messages_for(context: str, keys: list[str]) -> list[dict]:
    return [{"role": "user", "content": f"Read the text below carefully.\n\n{context}\n\n{question(keys)}"}]


def completion_prompt(context: str, key: str) -> str:
    """Base-model form: the text, then the start of the needle sentence to complete."""
    return f"{context}\n\nThe special magic number for the {key} is"


def request_for(mode: str, context: str, keys: list[str]) -> dict:
    """The prompt part of the request body (and of /tokenize) in the gate's mode."""
    if mode == "completion":
        return {"prompt": completion_prompt(context, keys[0])}
    return {"messages": messages_for(context, keys)}


async def _fit(
    ctx: Context,
    sents: list[str],
    start: int,
    needles: list[str],
    keys: list[str],
    depth: float,
    target: int,
    ratio: float,
    mode: str = "chat",
) -> tuple[dict, int, list[str]]:
    """Grow or shrink the sentence window until the templated prompt is within [0.9, 1.0] x target.

    Sentences differ a lot in length, so when no count fits at one start (a count one
    sentence larger is too long, one smaller too short) the window moves on in the text.
    """
    count, tried, last = max(1, int(target * ratio)), set(), 0
    for _ in range(24):
        window = sents[start : start + count]
        if len(window) < count:
            raise GateFailure(f"haystack too short for {target} tokens; use a longer text")
        req = request_for(mode, build_haystack(window, needles, depth), keys)
        last = n = len(await ctx.server.tokenize(**req))
        if 0.9 * target <= n <= target:
            return req, n, window
        tried.add(count)
        nxt = max(1, int(count * (0.95 * target) / n))
        if nxt == count:
            nxt = count - 1 if n > target else count + 1
        if nxt in tried or nxt < 1:
            start = (start + count + 1) % max(1, len(sents) - 2 * count - 1)
            tried = set()
        count = max(1, nxt)
    raise GateFailure(f"could not size a prompt to {target} tokens from this haystack (last try {last})")


def measure(items: list[dict]) -> dict:
    """The gate's figures from every prompt's item (its length_tokens and score())."""
    hidden, found = sum(len(i["codes"]) for i in items), sum(i["found_count"] for i in items)
    by_len: dict[str, list[int]] = {}
    for i in items:
        d = by_len.setdefault(str(i["length_tokens"]), [0, 0])
        d[0] += i["found_count"]
        d[1] += len(i["codes"])
    return {
        "found_fraction": round(found / hidden, 4) if hidden else 0,
        "codes_found": found,
        "codes_hidden": hidden,
        "echoed_responses": sum(i["echoed"] for i in items),
        "found_by_length": {k: f"{a}/{b}" for k, (a, b) in by_len.items()},
    }


WINDOW = "window"  # the length key of the prompt that fills the served window (window_fill_fraction)


def lengths(cfg: NeedlesGate) -> list:
    """The prompt lengths of the gate: lengths_tokens, then WINDOW when window_fill_fraction is set."""
    return [*cfg.lengths_tokens, *([WINDOW] if cfg.window_fill_fraction else [])]


def window_tokens(cfg: NeedlesGate, max_model_len: int | None) -> int:
    if not max_model_len:
        raise GateFailure("window_fill_fraction needs the served max_model_len, which /v1/models did not report")
    return int(cfg.window_fill_fraction * max_model_len) - cfg.max_tokens


def verdict(measured: dict, items: list[dict], cfg: NeedlesGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    found, hidden = measured.get("codes_found"), measured.get("codes_hidden")
    want = len(cfg.fillers) * len(lengths(cfg)) * len(depth_sets(cfg)) * cfg.codes_per_prompt
    if not isinstance(found, int) or not isinstance(hidden, int) or hidden <= 0:
        return [(False, f"codes_found {found!r} / codes_hidden {hidden!r} are not counts")]
    frac = found / hidden
    return [
        (hidden == want, f"{hidden} codes hidden, the gate hides {want}"),
        (
            frac >= cfg.min_found_fraction,
            f"found_fraction {frac:.3f} < {cfg.min_found_fraction} ({found}/{hidden} codes)",
        ),
    ]


async def run(ctx: Context, cfg: NeedlesGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"min_found_fraction": cfg.min_found_fraction}
    rng = random.Random(cfg.seed)
    sizes = {L: (window_tokens(cfg, ctx.max_model_len) if L == WINDOW else L) for L in lengths(cfg)}
    for L in cfg.lengths_tokens:
        ctx.check_fits(L, cfg.max_tokens, f"needles length {L}")
    jobs, builtin = [], {}
    for filler in cfg.fillers:
        sents = gate_data.haystack(ctx.data, filler)
        if filler.startswith("builtin:"):
            from cookbook.gates import gatedata

            builtin[filler] = gatedata.digest(filler)
        sample = " ".join(sents[:400])
        ratio = 400 / max(1, len(await ctx.server.tokenize(prompt=sample)))  # sentences per token
        # Long prompts (past the text's own length) get further passes over it, never a repeated word.
        sents = gate_data.long_sentences(sents, int(max(sizes.values()) * ratio * 1.6) + 64, cfg.seed)
        for L in lengths(cfg):
            for depth in depth_sets(cfg):
                keys = rng.sample(KEYS, cfg.codes_per_prompt)
                codes = [str(rng.randrange(1_000_000, 10_000_000)) for _ in keys]
                start = rng.randrange(0, max(1, len(sents) - int(sizes[L] * ratio * 1.5) - 1))
                jobs.append((filler, L, depth, keys, codes, start, sents, ratio))

    async def one(job):
        filler, L, depth, keys, codes, start, sents, ratio = job
        needles = [needle_sentence(k, c) for k, c in zip(keys, codes)]
        req, n_tok, window = await _fit(ctx, sents, start, needles, keys, depth, sizes[L], ratio, cfg.mode)
        body = {**req, "temperature": 0.0, "max_tokens": cfg.max_tokens, "seed": cfg.seed}
        if cfg.mode == "completion":
            body["stop"] = [".", "\n"]
        path = "/v1/completions" if cfg.mode == "completion" else "/v1/chat/completions"
        body = await ctx.server.post(path, body, tag=f"{filler}/{L}/{depth_tag(depth)}")
        choice = body["choices"][0]
        content = choice.get("text") if cfg.mode == "completion" else (choice.get("message") or {}).get("content")
        item = {
            "filler": filler,
            "length_tokens": L,
            "depth_pct": list(depth) if isinstance(depth, tuple) else depth,
            "prompt_tokens": n_tok,
            **score(content, codes, " ".join(window)),
            "content": content,
            "finish_reason": choice.get("finish_reason"),
        }
        r.items.append(item)
        return item

    items = await bounded_gather(cfg.max_concurrent_requests, [one(j) for j in jobs])
    r.measured = measure(items)
    if builtin:
        r.measured["builtin_sha256"] = builtin
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: NeedlesGate) -> tuple[dict, list[dict]]:
    """The measured figures again from the bundle's transcript: the codes hidden in each recorded
    prompt, found (or not) in its answer (`gates verify` calls it)."""
    recs = recorded.requests("needles")
    items = []
    for filler in cfg.fillers:
        for L in lengths(cfg):
            for depth in depth_sets(cfg):
                rec = need(recs, f"{filler}/{L}/{depth_tag(depth)}")
                req, body = rec["request"], ok_body(rec)
                choice = body["choices"][0]
                if cfg.mode == "completion":
                    prompt, content = req["prompt"], choice.get("text")
                    context = prompt.rsplit("\n\n", 1)[0]
                else:
                    prompt, content = req["messages"][0]["content"], (choice.get("message") or {}).get("content")
                    context = prompt.removeprefix("Read the text below carefully.\n\n").rsplit("\n\n", 1)[0]
                hidden = NEEDLE.findall(context)
                if len(hidden) != cfg.codes_per_prompt:
                    raise ValueError(
                        f"request {rec['tag']!r} hides {len(hidden)} codes, the gate hides {cfg.codes_per_prompt}"
                    )
                hay = context
                for key, code in hidden:
                    hay = hay.replace(needle_sentence(key, code), " ")
                items.append({"length_tokens": L, **score(content, [c for _, c in hidden], hay)})
    return measure(items), items
