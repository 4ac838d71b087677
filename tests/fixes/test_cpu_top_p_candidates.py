"""Regression test of fix cpu-top-p-candidates.

On CPU, vLLM applies top-p by sorting every row of the logits over the whole vocabulary
(apply_top_k_top_p_pytorch); with n-gram speculation that is one row per draft token as well.
Gemma 3's vocabulary is 262,144 tokens, so a sampled chat request at 16 streams spent most of
each step sorting (median TPOT 420 ms against 83 ms for greedy prose, benchmarks/README.md).
The fix takes each row's top 1024 (then 16384) tokens and masks from them alone when they
hold at least top_p of the probability; only the rows left are sorted as before.

Run in the engine's Python against a tree, on seeded logits of the vocabulary's size:
the unpatched sampler sorts the whole vocabulary; the patched one does not when the mass is
in the candidates, sorts only the rows where it is not, and keeps the tokens the unpatched one
keeps (where a cut lies within float32 rounding of top_p, both are held to the float64 answer).
"""

from __future__ import annotations

import pytest
from fixes_helpers import json_from_tree

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

# Each case: seeded logits (8 rows of Gemma 3's vocabulary) and top_p per row. "peaked" is a
# language model's next token: a head of a few dozen likely tokens over a long, flat tail
# (the head holds about 99%); "wide" has a head of 3000 tokens, so its cut lies between the
# 1024 and the 16384 candidates; "flat" is the tail alone, where top-p reaches past both;
# "some flat" has 3 flat rows among peaked ones; "mixed" mixes rows without top-p (p = 1) and
# rows masked by a grammar (-inf).
SAMPLE = r"""
import hashlib, json, torch
from vllm.v1.sample.ops import topk_topp_sampler as s

sorted_rows = []  # (rows, width) of every sort
_sort = torch.Tensor.sort
def spy(self, *a, **kw):
    sorted_rows.append((int(self.shape[0]), int(self.shape[-1])))
    return _sort(self, *a, **kw)
torch.Tensor.sort = spy

V, B = 262144, 8
g = torch.Generator().manual_seed(20261206)
def tail():
    return torch.randn(B, V, generator=g)
def peaked():
    x = tail()
    for r in range(B):
        ids = torch.randperm(V, generator=g)[:40]
        x[r, ids] += torch.linspace(18.0, 6.0, 40)
    return x
def wide():
    x = tail()
    for r in range(B):
        x[r, torch.randperm(V, generator=g)[:3000]] += 9.0
    return x
cases = {
    "peaked": (peaked(), torch.tensor([0.95, 0.9, 0.8, 0.5, 0.99, 0.95, 0.7, 0.3])),
    "wide": (wide(), torch.full((B,), 0.95)),
    "flat": (tail(), torch.full((B,), 0.95)),
}
x = peaked()
x[2:5] = tail()[2:5]
cases["some flat"] = (x, torch.full((B,), 0.95))
x = peaked()
x[1, : V // 2] = -float("inf")
x[5, 1000:] = -float("inf")
cases["mixed"] = (x, torch.tensor([1.0, 0.95, 1.0, 0.9, 0.95, 0.95, 1.0, 0.8]))

out = {}
for name, (logits, p) in cases.items():
    sorted_rows.clear()
    masked = s.apply_top_k_top_p_pytorch(logits.clone(), None, p, allow_cpu_sync=True)
    sorts = sorted(set(sorted_rows))  # before the reference below sorts too
    kept = ~torch.isinf(masked)
    counts = kept.sum(dim=-1)
    # the exact answer, in float64: how many tokens the rule keeps, and how close the cut is to a tie
    lp = logits.double().log_softmax(dim=-1)
    ranked = lp.sort(dim=-1, descending=True)
    probs = ranked.values.exp()
    above = probs.cumsum(dim=-1) - probs
    exact = (above < p.double().unsqueeze(1)).sum(dim=-1).clamp(min=1)
    exact = torch.where(p < 1, exact, torch.isfinite(logits).sum(dim=-1))
    near = [float((above[r] - p[r]).abs().min()) for r in range(B)]
    top = torch.zeros_like(kept)
    top.scatter_(1, ranked.indices, torch.arange(V).expand(B, V) < counts.unsqueeze(1))
    out[name] = {
        "sorted": sorts,
        "kept_per_row": counts.tolist(),
        "exact_per_row": exact.tolist(),
        "cut_to_a_tie": near,
        "top_tokens": bool((top == kept).all()),
        "rows": [hashlib.sha256(row.numpy().tobytes()).hexdigest()[:16] for row in kept],
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine_masks(pristine_tree) -> dict:
    return json_from_tree(pristine_tree, SAMPLE)


@pytest.fixture(scope="module")
def patched_masks(patched_tree) -> dict:
    return json_from_tree(patched_tree, SAMPLE)


def test_unpatched_top_p_sorts_the_whole_vocabulary(pristine_masks):
    assert pristine_masks["peaked"]["sorted"] == [[8, 262144]], pristine_masks["peaked"]
    # the cases are what they say: where each row's cut lies
    assert max(pristine_masks["peaked"]["kept_per_row"]) < 1024, pristine_masks["peaked"]
    assert all(1024 < n < 16384 for n in pristine_masks["wide"]["kept_per_row"]), pristine_masks["wide"]
    assert min(pristine_masks["flat"]["kept_per_row"]) > 16384, pristine_masks["flat"]


def test_patched_top_p_skips_the_sort_and_keeps_the_same_tokens(patched_masks, pristine_masks):
    for name in ("peaked", "wide", "mixed"):
        assert patched_masks[name]["sorted"] == [], (name, patched_masks[name])
    for name in ("peaked", "flat", "some flat", "mixed"):
        assert patched_masks[name]["rows"] == pristine_masks[name]["rows"], (name, patched_masks[name])
    # "wide": 3000 near-equal tokens, each about 3e-4 of the mass, so float32 rounding can move a
    # cut that lies close to top_p by a token. Both keep the top tokens, the exact count (float64)
    # wherever the cut is 1e-4 or more from a tie, and at most one token off where it is nearer.
    for got in (patched_masks["wide"], pristine_masks["wide"]):
        assert got["top_tokens"], got
        for n, exact, near in zip(got["kept_per_row"], got["exact_per_row"], got["cut_to_a_tie"]):
            assert n == exact if near >= 1e-4 else abs(n - exact) <= 1, got


def test_patched_top_p_sorts_only_the_rows_past_the_candidates(patched_masks, pristine_masks):
    assert patched_masks["flat"]["sorted"] == [[8, 262144]], patched_masks["flat"]
    assert patched_masks["some flat"]["sorted"] == [[3, 262144]], patched_masks["some flat"]
