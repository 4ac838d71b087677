"""The plugin's dummy fill zeroes the routing bias where the router reads it (CPU, real torch modules)."""

from __future__ import annotations

import torch

from cookbook.vllm_plugin.mxfp4_moe import balance_dummy_routing


def test_the_bias_the_gate_shares_with_the_experts_layer_becomes_zero():
    gate = torch.nn.Module()
    gate.e_score_correction_bias = torch.nn.Parameter(torch.rand(256) * 2e-3 - 1e-3, requires_grad=False)
    experts = torch.nn.Module()
    experts.e_score_correction_bias = gate.e_score_correction_bias  # as FusedMoE hands it on
    balance_dummy_routing(experts)
    assert torch.count_nonzero(gate.e_score_correction_bias) == 0


def test_a_hash_routed_layer_has_no_bias_and_is_left_alone():
    experts = torch.nn.Module()
    experts.e_score_correction_bias = None
    experts.w = torch.nn.Parameter(torch.ones(3), requires_grad=False)
    balance_dummy_routing(experts)
    assert experts.e_score_correction_bias is None and torch.equal(experts.w, torch.ones(3))
