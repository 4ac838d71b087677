"""reasoning_split: the reasoning parser leaves the answer in `content`.

A reasoning model's server splits each reply into its thinking (message.reasoning) and its
answer (message.content). With a parser that does not match the model, the whole reply is
classified as reasoning and content is null however large max_tokens is: it looks exactly like
a truncated think but never resolves (the SlimServe document, 'Reasoning output'). The gate
sends the first `requests` built-in writing tasks with a 2,048-token budget (the document's
'safe starting point') and fails on any null or empty content.
"""

from __future__ import annotations

from cookbook.gates import data as gate_data
from cookbook.gates import gatedata
from cookbook.gates.client import bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.recipe.gates_spec.reasoning_split import ReasoningSplitGate

FORMULAS = {
    "content_fraction": "requests whose message.content is a non-empty string / requests",
    "reasoning_fraction": "requests whose reasoning field is a non-empty string / requests",
}
PROMPTS = gatedata.TASKS


def item_of(message: dict, finish_reason, cfg: ReasoningSplitGate) -> dict:
    content = message.get("content")
    # the configured field, else either name vLLM has used (>= 0.11: reasoning; before: reasoning_content)
    reasoning = next(
        (message[k] for k in (cfg.reasoning_field, "reasoning", "reasoning_content") if message.get(k)), None
    )
    return {
        "content_null": content is None,
        "has_content": isinstance(content, str) and bool(content.strip()),
        "has_reasoning": isinstance(reasoning, str) and bool(reasoning.strip()),
        "content_chars": len(content) if isinstance(content, str) else 0,
        "reasoning_chars": len(reasoning) if isinstance(reasoning, str) else 0,
        "finish_reason": finish_reason,
    }


def measure(items: list[dict]) -> dict:
    n = len(items)
    return {
        "requests": n,
        "content_fraction": round(sum(i["has_content"] for i in items) / n, 4) if n else 0.0,
        "reasoning_fraction": round(sum(i["has_reasoning"] for i in items) / n, 4) if n else 0.0,
        "null_content": sum(i["content_null"] for i in items),
    }


def verdict(measured: dict, items: list[dict], cfg: ReasoningSplitGate) -> list[tuple[bool, str]]:
    n, frac = measured.get("requests"), measured.get("content_fraction")
    checks = [
        (n == cfg.requests, f"{n} requests measured, the gate sends {cfg.requests}"),
        (
            isinstance(frac, (int, float)) and frac >= cfg.min_content_fraction,
            f"content_fraction {frac} < {cfg.min_content_fraction}: {measured.get('null_content')} replies came back "
            f"with content null within {cfg.max_tokens} tokens (a reasoning parser that does not match the model "
            "returns every answer as reasoning; pass the model's --reasoning-parser)",
        ),
    ]
    if cfg.require_reasoning:
        r = measured.get("reasoning_fraction")
        checks.append(
            (
                isinstance(r, (int, float)) and r > 0,
                f"no reply carried {cfg.reasoning_field!r}: the model did not think or the parser found nothing",
            )
        )
    return checks


def _body(prompt: str, cfg: ReasoningSplitGate) -> dict:
    return {"messages": [{"role": "user", "content": prompt}], "temperature": 0.0, "max_tokens": cfg.max_tokens}


async def run(ctx: Context, cfg: ReasoningSplitGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {"min_content_fraction": cfg.min_content_fraction, "max_tokens": cfg.max_tokens}
    prompts = gate_data.builtin_prompts(PROMPTS, cfg.requests)

    async def one(i: int, prompt: str) -> dict:
        body = await ctx.server.post("/v1/chat/completions", _body(prompt, cfg), tag=f"task{i}")
        choice = body["choices"][0]
        item = {"task": i, **item_of(choice.get("message") or {}, choice.get("finish_reason"), cfg)}
        r.items.append(item)
        return item

    items = await bounded_gather(cfg.max_concurrent_requests, [one(i, p) for i, p in enumerate(prompts)])
    r.measured = measure(items)
    r.judge(verdict(r.measured, items, cfg))


def recompute(recorded: RecordedRun, cfg: ReasoningSplitGate) -> tuple[dict, list[dict]]:
    recs = recorded.requests("reasoning_split")
    prompts = gate_data.builtin_prompts(PROMPTS, cfg.requests)
    items = []
    for i, prompt in enumerate(prompts):
        rec = need(recs, f"task{i}")
        want = _body(prompt, cfg)
        if any(rec["request"].get(k) != v for k, v in want.items()):
            raise ValueError(f"request task{i} is not the gate's request (prompt, temperature 0, max_tokens)")
        choice = ok_body(rec)["choices"][0]
        items.append({"task": i, **item_of(choice.get("message") or {}, choice.get("finish_reason"), cfg)})
    return measure(items), items
