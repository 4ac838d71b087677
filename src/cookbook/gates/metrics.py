"""Prometheus text parsing and the counter deltas the gates read from vLLM's /metrics."""

from __future__ import annotations


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    from prometheus_client.parser import text_string_to_metric_families

    return [
        (s.name, dict(s.labels), float(s.value))
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) for every sample, read by prometheus_client's text parser.

    A text the parser refuses is read again line by line, so one malformed line costs only
    itself (comments are skipped either way).
    """
    try:
        return _samples(text)
    except ValueError:
        pass
    out = []
    for line in text.splitlines():
        if line.strip() and not line.startswith("#"):
            try:
                out += _samples(line + "\n")
            except ValueError:
                continue
    return out


def counter_total(text: str, name: str, **match: str) -> float | None:
    """Sum of a counter over all its labelled series (engines, models); None when absent.

    Accepts the name with or without the `_total` suffix and ignores `_created` series.
    """
    names = {name, name + "_total"} if not name.endswith("_total") else {name, name[: -len("_total")]}
    found, total = False, 0.0
    for n, labels, v in parse(text):
        if n in names and all(labels.get(k) == want for k, want in match.items()):
            found = True
            total += v
    return total if found else None


def delta(before: str, after: str, name: str, **match: str) -> float | None:
    a, b = counter_total(after, name, **match), counter_total(before, name, **match)
    if a is None:
        return None
    return a - (b or 0.0)


SPEC_ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
SPEC_DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
SPEC_DRAFTS = "vllm:spec_decode_num_drafts"
SPEC_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos"

SPEC_FORMULAS = {
    "acceptance_rate": "Δ vllm:spec_decode_num_accepted_tokens / Δ vllm:spec_decode_num_draft_tokens (summed over engines)",
    "mean_acceptance_length": "1 + Δ vllm:spec_decode_num_accepted_tokens / Δ vllm:spec_decode_num_drafts",
    "per_position_rate[i]": "Δ vllm:spec_decode_num_accepted_tokens_per_pos{position=i} / Δ vllm:spec_decode_num_drafts",
}


def spec_decode_stats(before: str, after: str) -> dict:
    """Acceptance figures from two /metrics snapshots. Raises ValueError with the reason if absent/idle."""
    accepted = delta(before, after, SPEC_ACCEPTED)
    draft_tokens = delta(before, after, SPEC_DRAFT_TOKENS)
    drafts = delta(before, after, SPEC_DRAFTS)
    if accepted is None or draft_tokens is None or drafts is None:
        raise ValueError("the server exposes no vllm:spec_decode_* counters: speculative decoding is not configured")
    if draft_tokens <= 0 or drafts <= 0:
        raise ValueError("vllm:spec_decode_num_draft_tokens did not increase: no tokens were drafted during the gate")
    positions = sorted(
        {int(l["position"]) for n, l, _ in parse(after) if n.startswith(SPEC_PER_POS) and "position" in l}
    )
    per_pos = []
    for p in positions:
        d = delta(before, after, SPEC_PER_POS, position=str(p))
        per_pos.append(round((d or 0.0) / drafts, 4))
    return {
        "accepted_tokens": accepted,
        "draft_tokens": draft_tokens,
        "drafts": drafts,
        "acceptance_rate": accepted / draft_tokens,
        "mean_acceptance_length": 1.0 + accepted / drafts,
        "per_position_rate": per_pos,
    }
