"""greedy: fixed prompts at temperature 0, run one at a time (same batch shape), must repeat exactly."""

from __future__ import annotations

from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.recipe.gates_spec.greedy import GreedyGate

FORMULAS = {"identical_prompts": "prompts whose `repeats` completions are byte-identical and non-empty"}


def score(runs: list[list[str]]) -> list[dict]:
    """Per prompt: identical when every run equals the first and the text is not empty."""
    out = []
    for i, texts in enumerate(runs):
        same = len(texts) >= 2 and all(t == texts[0] for t in texts)
        out.append(
            {
                "prompt": i,
                "identical": same and bool(texts[0].strip()),
                "empty": not texts[0].strip() if texts else True,
                "distinct_outputs": len(set(texts)),
            }
        )
    return out


def measure(scored: list[dict]) -> dict:
    return {"identical_prompts": sum(s["identical"] for s in scored), "prompts": len(scored)}


def verdict(measured: dict, items: list[dict], cfg: GreedyGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    ok, n = measured.get("identical_prompts"), measured.get("prompts")
    return [
        (n == len(cfg.prompts), f"{n} prompts measured, the gate has {len(cfg.prompts)}"),
        (
            ok == n,
            f"{(n or 0) - (ok or 0)} of {n} prompts differ between runs or are empty: "
            + ", ".join(str(s.get("prompt")) for s in items if not s.get("identical")),
        ),
    ]


async def run(ctx: Context, cfg: GreedyGate) -> None:
    r = ctx.result
    r.formulas, r.thresholds = FORMULAS, {"identical_prompts": len(cfg.prompts)}
    runs: list[list[str]] = []
    for i, prompt in enumerate(cfg.prompts):
        texts = []
        for k in range(cfg.repeats):
            body = await ctx.server.post(
                "/v1/chat/completions",
                {
                    "messages": [{"role": "user", "content": prompt}],
                    "temperature": 0.0,
                    "max_tokens": cfg.max_tokens,
                    "seed": cfg.seed,
                },
                tag=f"prompt{i}/run{k}",
            )
            texts.append(body["choices"][0]["message"].get("content") or "")
        runs.append(texts)
        r.items.append({"prompt": prompt, "outputs": texts})
    scored = score(runs)
    for item, s in zip(r.items, scored):
        item.update(s)
    r.measured = measure(scored)
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: GreedyGate) -> tuple[dict, list[dict]]:
    """The measured figures again from the bundle's transcript (`gates verify` calls it)."""
    recs = recorded.requests("greedy")
    runs = []
    for i, prompt in enumerate(cfg.prompts):
        texts = []
        for k in range(cfg.repeats):
            rec = need(recs, f"prompt{i}/run{k}")
            req = rec["request"]
            if req.get("messages") != [{"role": "user", "content": prompt}] or req.get("temperature") != 0.0:
                raise ValueError(f"request prompt{i}/run{k} is not the gate's prompt at temperature 0")
            texts.append(ok_body(rec)["choices"][0]["message"].get("content") or "")
        runs.append(texts)
    scored = score(runs)
    return measure(scored), scored
