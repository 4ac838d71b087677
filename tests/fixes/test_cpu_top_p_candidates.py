"""Regression test of fix cpu-top-p-candidates.

On CPU, vLLM applies top-p by sorting every row of the logits over the whole vocabulary
(apply_top_k_top_p_pytorch); with n-gram speculation that is one row per draft token as well.
Gemma 3's vocabulary is 262,144 tokens, so a sampled chat request at 16 streams spent most of
each step sorting (median TPOT 420 ms against 83 ms for greedy prose, benchmarks/README.md).
The fix takes the top 1024 tokens first and masks from them alone when they hold at least
top_p of the probability; otherwise it sorts as before.

Run in the engine's Python against a tree, on seeded logits of the vocabulary's size:
the unpatched sampler sorts the whole vocabulary; the patched one does not when the mass is
in the candidates, falls back to the sort when it is not, and keeps exactly the tokens the
unpatched one keeps in every row.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from fixes_helpers import env_for

from cookbook.engine import engine_python

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

# Each case: seeded logits (8 rows of Gemma 3's vocabulary) and top_p per row. "peaked" is a
# language model's next token: a head of a few dozen likely tokens over a long, flat tail
# (the head holds about 99%); "flat" is that tail alone, where top-p reaches far past 1024
# tokens; "mixed" mixes rows without top-p (p = 1) and rows masked by a grammar (-inf).
SAMPLE = r"""
import hashlib, json, torch
from vllm.v1.sample.ops import topk_topp_sampler as s

sorted_widths = []
_sort = torch.Tensor.sort
def spy(self, *a, **kw):
    sorted_widths.append(int(self.shape[-1]))
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
cases = {
    "peaked": (peaked(), torch.tensor([0.95, 0.9, 0.8, 0.5, 0.99, 0.95, 0.7, 0.3])),
    "flat": (tail(), torch.full((B,), 0.95)),
}
x = peaked()
x[1, : V // 2] = -float("inf")
x[5, 1000:] = -float("inf")
cases["mixed"] = (x, torch.tensor([1.0, 0.95, 1.0, 0.9, 0.95, 0.95, 1.0, 0.8]))

out = {}
for name, (logits, p) in cases.items():
    sorted_widths.clear()
    masked = s.apply_top_k_top_p_pytorch(logits.clone(), None, p, allow_cpu_sync=True)
    kept = ~torch.isinf(masked)
    out[name] = {
        "sorted_widths": sorted(set(sorted_widths)),
        "kept_per_row": kept.sum(dim=-1).tolist(),
        "rows": [hashlib.sha256(row.numpy().tobytes()).hexdigest()[:16] for row in kept],
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine_masks(pristine_tree) -> dict:
    return _masks(pristine_tree)


@pytest.fixture(scope="module")
def patched_masks(patched_tree) -> dict:
    return _masks(patched_tree)


def _masks(tree) -> dict:
    res = subprocess.run(
        [str(engine_python()), "-c", SAMPLE], env=env_for(tree), capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_unpatched_top_p_sorts_the_whole_vocabulary(pristine_masks):
    assert pristine_masks["peaked"]["sorted_widths"] == [262144], pristine_masks["peaked"]
    # the cases are what they say: the head holds top_p within a few dozen tokens, the flat tail does not
    assert max(pristine_masks["peaked"]["kept_per_row"]) < 1024, pristine_masks["peaked"]
    assert min(pristine_masks["flat"]["kept_per_row"]) > 1024, pristine_masks["flat"]


def test_patched_top_p_skips_the_sort_and_keeps_the_same_tokens(patched_masks, pristine_masks):
    assert patched_masks["peaked"]["sorted_widths"] == [], patched_masks["peaked"]
    assert patched_masks["mixed"]["sorted_widths"] == [], patched_masks["mixed"]
    for name in ("peaked", "mixed"):
        assert patched_masks[name]["rows"] == pristine_masks[name]["rows"], (name, patched_masks[name])


def test_patched_top_p_falls_back_to_the_sort_past_the_candidates(patched_masks, pristine_masks):
    assert patched_masks["flat"]["sorted_widths"] == [262144], patched_masks["flat"]
    assert patched_masks["flat"]["rows"] == pristine_masks["flat"]["rows"]
