"""Routed-expert shapes of the model families the MXFP4 MoE kernel is built for.

One place for these facts: build.sh, the benchmark, the tuned configs and the tests read them here.
"""

from __future__ import annotations

from dataclasses import dataclass


def mxfp4_bytes(weights: int) -> int:
    """Bytes of `weights` MXFP4 weights (a multiple of 32): 1/2 byte packed + 1/32 byte of E8M0 scale each."""
    return weights * 17 // 32


@dataclass(frozen=True)
class MoEShape:
    family: str
    experts: int  # E: routed experts per layer
    hidden: int  # H: input/output width of a routed expert
    intermediate: int  # I: per-expert intermediate width (w13 has 2I rows: [gate; up])
    top_k: int
    source: str

    def w13_bytes(self) -> int:
        """Bytes of one expert's w13 ([gate; up], 2I x H): packed nibbles + E8M0 scales."""
        return mxfp4_bytes(2 * self.intermediate * self.hidden)

    def w2_bytes(self) -> int:
        """Bytes of one expert's w2 (H x I): packed nibbles + E8M0 scales."""
        return mxfp4_bytes(self.hidden * self.intermediate)

    def expert_bytes(self) -> int:
        """Bytes of one expert's MXFP4 weights (packed nibbles + E8M0 scales), w13 and w2."""
        return self.w13_bytes() + self.w2_bytes()


VARIANTS: dict[str, MoEShape] = {
    "glm": MoEShape(
        family="GLM-5.2",
        experts=256,
        hidden=6144,
        intermediate=2048,
        top_k=8,
        source="issue 8 (GLM-5.2 routed experts: E=256, H=6144, I=2048, top-8)",
    ),
    "dsv4": MoEShape(
        family="DeepSeek-V4-Flash",
        experts=256,
        hidden=4096,
        intermediate=2048,
        top_k=6,
        source="DeepSeek-V4-Flash config.json (hidden_size 4096, moe_intermediate_size 2048, "
        "n_routed_experts 256, num_experts_per_tok 6), as quoted in public repositories",
    ),
    "k3": MoEShape(
        family="Kimi K3",
        experts=896,
        hidden=3584,
        intermediate=3072,
        top_k=16,
        source="Kimi K3 text config (num_experts 896, num_experts_per_token 16, "
        "moe_intermediate_size 3072, routed_expert_hidden_size 3584: the routed experts "
        "run on a 3584-wide latent of the 7168 hidden), as quoted in public repositories",
    ),
}
