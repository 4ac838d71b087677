"""Regression test of fix spec-recovered-noise.

Under speculative decoding the rejection sampler draws exponential noise over the whole
vocabulary for every request in a sampled batch (sample_recovered_tokens), though only the
requests with draft tokens read it. With the CPU recipe's per-batch-size rule no request
drafts at 5-16 running requests, and the draw was 27.9% of the worker's time at 16 chat
streams (the patch's header). The fix returns at once when no request has a draft token and
otherwise draws only the rows that are read.

Run in the engine's Python against a tree (CPU tensors, as the CPU runner passes them), with
a seeded generator for every request: the unpatched sampler draws batch x vocabulary variates
even with no draft token; the patched one draws none then, only the drafted rows otherwise,
and recovers the same tokens.
"""

from __future__ import annotations

import pytest
from fixes_helpers import json_from_tree

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

V = 262144
RECOVER = r"""
import json, torch
from types import SimpleNamespace
from vllm.platforms import current_platform
current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()  # as the CPU worker does
from vllm.v1.sample import rejection_sampler as rs

drawn = []
_exp = torch.Tensor.exponential_
def spy(self, *a, **kw):
    drawn.append(int(self.numel()))
    return _exp(self, *a, **kw)
torch.Tensor.exponential_ = spy

V = 262144
out = {}
for name, num_draft in {"none drafted": [0, 0, 0, 0], "some drafted": [2, 0, 1, 0], "all drafted": [1, 2, 3, 1]}.items():
    g = torch.Generator().manual_seed(11)
    n = sum(num_draft)
    target = torch.randn(n, V, generator=g).mul_(3).softmax(dim=-1)
    draft = torch.randint(0, V, (n,), generator=g, dtype=torch.int32)
    cu = torch.tensor(num_draft, dtype=torch.int32).cumsum(0).to(torch.int32)
    meta = SimpleNamespace(generators={i: torch.Generator().manual_seed(100 + i) for i in range(len(num_draft))})
    drawn.clear()
    ids = rs.sample_recovered_tokens(max(num_draft), num_draft, cu, draft, None, target, meta, torch.device("cpu"))
    out[name] = {"drawn": list(drawn), "recovered": ids.tolist()}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine(pristine_tree) -> dict:
    return json_from_tree(pristine_tree, RECOVER)


@pytest.fixture(scope="module")
def patched(patched_tree) -> dict:
    return json_from_tree(patched_tree, RECOVER)


def test_unpatched_draws_the_whole_batch_without_a_draft_token(pristine):
    assert pristine["none drafted"] == {"drawn": [4 * V], "recovered": []}, pristine["none drafted"]


def test_patched_draws_only_for_requests_with_draft_tokens(patched, pristine):
    assert patched["none drafted"] == {"drawn": [], "recovered": []}
    # two of four requests drafted: their two rows, then each one's seeded row (as before)
    assert patched["some drafted"]["drawn"] == [2 * V, V, V], patched["some drafted"]
    assert pristine["some drafted"]["drawn"] == [4 * V, V, V], pristine["some drafted"]
    assert patched["all drafted"]["drawn"] == pristine["all drafted"]["drawn"] == [4 * V] + [V] * 4
    # one recovered token per draft token (3 and 7), the same as the unpatched sampler's
    for name, drafts in (("some drafted", 3), ("all drafted", 7)):
        assert len(patched[name]["recovered"]) == drafts, patched[name]
        assert patched[name]["recovered"] == pristine[name]["recovered"], name
