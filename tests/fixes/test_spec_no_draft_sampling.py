"""Regression test of fix spec-no-draft-sampling.

With speculation configured, every step goes through the rejection sampler, even one in
which no request has a draft token (the CPU recipe drafts none at 5-16 running requests).
Unpatched, that step copies the logits to a bonus tensor and samples it with raw-logits
logprobs (a second copy) before an empty rejection step; patched, it samples the logits as
the plain sampler does. With logprobs asked for, or any draft token, the path is unchanged.

Run in the engine's Python against a tree (CPU tensors, as the CPU runner passes them), with a
seeded generator for every request so that both paths can be held to the same tokens.
"""

from __future__ import annotations

import pytest
from fixes_helpers import json_from_tree

pytestmark = [pytest.mark.engine, pytest.mark.slow_tier("fixes")]

SAMPLE = r"""
import json, torch
from vllm.platforms import current_platform
current_platform.import_kernels()
current_platform.register_triton_kernel_overrides()  # as the CPU worker does
from vllm.v1.sample.sampler import Sampler
from vllm.v1.sample.rejection_sampler import RejectionSampler
from vllm.v1.sample.metadata import SamplingMetadata
from vllm.v1.sample.logits_processor import LogitsProcessors
from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

B, V = 4, 262144
calls = []
_forward = Sampler.forward
def spy(self, logits, sampling_metadata, predict_bonus_token=False, logprobs_mode_override=None):
    calls.append({"input_rows": int(logits.shape[0]), "in_place": logits.data_ptr() == given[0],
                  "override": logprobs_mode_override})
    return _forward(self, logits, sampling_metadata, predict_bonus_token, logprobs_mode_override)
Sampler.forward = spy

def metadata(greedy, logprobs):
    return SamplingMetadata(
        temperature=None if greedy else torch.full((B,), 0.8), all_greedy=greedy, all_random=not greedy,
        top_p=None, top_k=None, generators={i: torch.Generator().manual_seed(7 + i) for i in range(B)},
        max_num_logprobs=logprobs, no_penalties=True, prompt_token_ids=None,
        frequency_penalties=torch.zeros(B), presence_penalties=torch.zeros(B), repetition_penalties=torch.ones(B),
        output_token_ids=[[] for _ in range(B)], allowed_token_ids_mask=None, bad_words_token_ids={},
        logitsprocs=LogitsProcessors(), spec_token_ids=[[] for _ in range(B)])

def no_draft_metadata():
    # as the runner's _calc_spec_decode_metadata builds it for a step without draft tokens: one
    # sampled token a request, each the bonus token at its own row (make_dummy's indices are all 0)
    rows = torch.arange(B, dtype=torch.int32)
    return SpecDecodeMetadata(
        draft_token_ids=torch.empty(0, dtype=torch.int32), num_draft_tokens=[0] * B,
        cu_num_draft_tokens=torch.zeros(B, dtype=torch.int32), cu_num_sampled_tokens=rows + 1,
        target_logits_indices=torch.empty(0, dtype=torch.int32), bonus_logits_indices=rows, logits_indices=rows)

sampler = Sampler()
rejection = RejectionSampler(sampler)
base = torch.randn(B, V, generator=torch.Generator().manual_seed(3)) * 3
out = {}
for name, greedy, logprobs in (("greedy", True, None), ("sampled", False, None), ("logprobs", True, 2)):
    spec = no_draft_metadata()
    logits = base.clone()
    given = [logits.data_ptr()]
    calls.clear()
    res = rejection(spec, None, logits, metadata(greedy, logprobs))
    via_rejection = list(calls)
    logits = base.clone()
    given = [logits.data_ptr()]
    plain = sampler(logits, metadata(greedy, logprobs))
    out[name] = {
        "calls": via_rejection,
        "tokens": res.sampled_token_ids.tolist(),
        "dtype": str(res.sampled_token_ids.dtype),
        "plain_tokens": plain.sampled_token_ids.tolist(),
        "logprobs": res.logprobs_tensors is not None,
    }
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def pristine(pristine_tree) -> dict:
    return json_from_tree(pristine_tree, SAMPLE)


@pytest.fixture(scope="module")
def patched(patched_tree) -> dict:
    return json_from_tree(patched_tree, SAMPLE)


def test_unpatched_copies_the_logits_with_no_draft_token(pristine):
    for name in ("greedy", "sampled"):
        assert pristine[name]["calls"] == [{"input_rows": 4, "in_place": False, "override": "raw_logits"}], name


def test_patched_samples_the_logits_in_place_with_no_draft_token(patched):
    for name in ("greedy", "sampled"):
        assert patched[name]["calls"] == [{"input_rows": 4, "in_place": True, "override": None}], name


@pytest.mark.parametrize("tree", ["pristine", "patched"])
@pytest.mark.parametrize("case", ["greedy", "sampled", "logprobs"])
def test_no_draft_step_samples_what_the_plain_sampler_samples(tree, case, request):
    got = request.getfixturevalue(tree)[case]
    assert got["dtype"] == "torch.int32"
    assert len(got["tokens"]) == 4 and all(len(row) == 1 for row in got["tokens"]), got["tokens"]
    assert got["tokens"] == got["plain_tokens"]


def test_patched_keeps_the_rejection_path_when_logprobs_are_asked_for(patched, pristine):
    assert patched["logprobs"]["calls"] == pristine["logprobs"]["calls"]
    assert patched["logprobs"]["calls"][0]["in_place"] is False
    assert patched["logprobs"]["logprobs"] is True
