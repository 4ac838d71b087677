"""gsm8k: first N test problems, few-shot from train, strict and flexible extraction.

Extraction follows lm-eval's gsm8k task: strict takes the first '#### N'; flexible takes
the last number-like token. Both strip ',', '$' and a trailing '.' before comparing.
Only `content` is scored; a separate reasoning field is recorded, and answers cut off by
finish_reason 'length' are counted.
"""

from __future__ import annotations

import re

from cookbook.gates import data as gate_data
from cookbook.gates.client import bounded_gather
from cookbook.gates.context import Context
from cookbook.gates.recorded import RecordedRun, need, ok_body
from cookbook.recipe.gates_spec.gsm8k import Gsm8kGate

STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")

FORMULAS = {
    "accuracy_strict": "correct / n, answer = first match of '#### (-?[0-9.,]+)' in content",
    "accuracy_flexible": "correct / n, answer = last match of '(-?[$0-9.,]{2,})|(-?[0-9]+)' in content",
    "normalisation": "strip ',', '$' and a trailing '.'; exact string match with the gold '#### N'",
    "truncated_fraction": "responses with finish_reason 'length' / n",
}


def normalise(s: str) -> str:
    s = s.replace(",", "").replace("$", "").strip()
    s = re.sub(r"\.$", "", s)
    # '18.00' and '18' are the same answer.
    if re.fullmatch(r"-?\d+\.0+", s):
        s = s.split(".")[0]
    return s


def gold(answer: str) -> str:
    m = re.search(r"####\s*(.+)$", answer.strip())
    return normalise(m.group(1)) if m else ""


def extract_strict(text: str) -> str | None:
    m = STRICT.search(text)
    return normalise(m.group(1)) if m else None


def extract_flexible(text: str) -> str | None:
    found = [a or b for a, b in FLEXIBLE.findall(text)]
    found = [f for f in found if re.search(r"\d", f)]
    return normalise(found[-1]) if found else None


def score_item(content: str | None, gold_answer: str) -> dict:
    text = content or ""
    strict, flexible = extract_strict(text), extract_flexible(text)
    g = gold(gold_answer)
    return {
        "gold": g,
        "strict": strict,
        "flexible": flexible,
        "strict_correct": strict is not None and strict == g,
        "flexible_correct": flexible is not None and flexible == g,
    }


def completion_prompt(shots: list[dict], question: str) -> str:
    head = "".join(f"Question: {s['question']}\nAnswer: {s['answer']}\n\n" for s in shots)
    return head + f"Question: {question}\nAnswer:"


def chat_messages(shots: list[dict], question: str) -> list[dict]:
    msgs = []
    for s in shots:
        msgs += [
            {"role": "user", "content": f"Question: {s['question']}"},
            {"role": "assistant", "content": s["answer"]},
        ]
    msgs.append(
        {
            "role": "user",
            "content": f"Question: {question}\nEnd with '#### <number>'." if not shots else f"Question: {question}",
        }
    )
    return msgs


def read_message(choice: dict, reasoning_field: str | None) -> tuple[str | None, str | None]:
    """(content, reasoning); reasoning from the declared field, falling back to the other name."""
    msg = choice.get("message") or {}
    reasoning = None
    if reasoning_field:
        for name in (reasoning_field, "reasoning", "reasoning_content"):
            if msg.get(name):
                reasoning = msg[name]
                break
    return msg.get("content"), reasoning


def measure(items: list[dict]) -> dict:
    """The gate's figures from every problem's item (score_item(), finish_reason, content)."""
    n = len(items)
    return {
        "n": n,
        "accuracy_strict": round(sum(i["strict_correct"] for i in items) / n, 4),
        "accuracy_flexible": round(sum(i["flexible_correct"] for i in items) / n, 4),
        "truncated_fraction": round(sum(i["finish_reason"] == "length" for i in items) / n, 4),
        "null_content": sum(i["content"] is None for i in items),
    }


def verdict(measured: dict, items: list[dict], cfg: Gsm8kGate) -> list[tuple[bool, str]]:
    """The gate's checks as a pure function of what was measured (run() and `gates verify` call it)."""
    n, acc = measured.get("n"), measured.get(f"accuracy_{cfg.extraction}")
    trunc = measured.get("truncated_fraction")
    if not isinstance(acc, (int, float)) or not isinstance(trunc, (int, float)):
        return [(False, f"accuracy_{cfg.extraction} {acc!r} / truncated_fraction {trunc!r} are not numbers")]
    checks = [
        (n == cfg.n, f"{n} problems measured, the gate asks {cfg.n}"),
        (acc >= cfg.min_correct_fraction, f"accuracy_{cfg.extraction} {acc:.3f} < {cfg.min_correct_fraction}"),
    ]
    if cfg.max_truncated_fraction is not None:
        checks.append(
            (
                trunc <= cfg.max_truncated_fraction,
                f"truncated_fraction {trunc:.3f} > {cfg.max_truncated_fraction} (finish_reason 'length')",
            )
        )
    return checks


def effort(cfg: Gsm8kGate) -> dict:
    """The request fields that set the gate's reasoning effort (chat only; none: the server's default)."""
    if cfg.reasoning_effort is None:
        return {}
    return {"chat_template_kwargs": {"reasoning_effort": cfg.reasoning_effort}}


async def run(ctx: Context, cfg: Gsm8kGate) -> None:
    r = ctx.result
    r.formulas = FORMULAS
    r.thresholds = {
        f"accuracy_{cfg.extraction}": cfg.min_correct_fraction,
        "max_truncated_fraction": cfg.max_truncated_fraction,
    }
    shots = gate_data.gsm8k(ctx.data, "train", cfg.shots) if cfg.shots else []
    problems = gate_data.gsm8k(ctx.data, "test", cfg.n)

    async def one(i: int, p: dict):
        common = {"temperature": 0.0, "max_tokens": cfg.max_tokens, "seed": cfg.seed, "stop": cfg.stop}
        if cfg.mode == "chat":
            body = await ctx.server.post(
                "/v1/chat/completions",
                {"messages": chat_messages(shots, p["question"]), **common, **effort(cfg)},
                tag=f"q{i}",
            )
            choice = body["choices"][0]
            content, reasoning = read_message(choice, cfg.reasoning_field)
        else:
            body = await ctx.server.post(
                "/v1/completions", {"prompt": completion_prompt(shots, p["question"]), **common}, tag=f"q{i}"
            )
            choice = body["choices"][0]
            content, reasoning = choice.get("text"), None
        item = {
            "index": i,
            **score_item(content, p["answer"]),
            "finish_reason": choice.get("finish_reason"),
            "content": content,
            "reasoning_chars": len(reasoning or ""),
            "completion_tokens": (body.get("usage") or {}).get("completion_tokens"),
        }
        r.items.append(item)
        return item

    items = await bounded_gather(cfg.max_concurrent_requests, [one(i, p) for i, p in enumerate(problems)])
    r.measured = {**measure(items), "with_reasoning": sum(i["reasoning_chars"] > 0 for i in items)}
    r.judge(verdict(r.measured, r.items, cfg))


def recompute(recorded: RecordedRun, cfg: Gsm8kGate) -> tuple[dict, list[dict]]:
    """The measured figures again from the bundle's transcript (`gates verify` calls it): answers
    extracted again; the gold answers come from results.json's items (the test set is not in the
    bundle)."""
    recs = recorded.requests("gsm8k")
    claimed = {i.get("index"): i for i in (recorded.doc["gates"]["gsm8k"].get("items") or [])}
    items = []
    for i in range(cfg.n):
        rec = need(recs, f"q{i}")
        if cfg.mode == "chat" and cfg.reasoning_effort is not None:
            kwargs = rec["request"].get("chat_template_kwargs")
            if not isinstance(kwargs, dict) or kwargs.get("reasoning_effort") != cfg.reasoning_effort:
                raise ValueError(f"request q{i} did not ask reasoning_effort {cfg.reasoning_effort!r}")
        choice = ok_body(rec)["choices"][0]
        content = read_message(choice, cfg.reasoning_field)[0] if cfg.mode == "chat" else choice.get("text")
        gold = (claimed.get(i) or {}).get("gold")
        if not isinstance(gold, str):
            raise ValueError(f"results.json has no gold answer for problem {i}")
        items.append(
            {
                "index": i,
                **score_item(content, f"#### {gold}"),
                "content": content,
                "finish_reason": choice.get("finish_reason"),
            }
        )
    return measure(items), items
