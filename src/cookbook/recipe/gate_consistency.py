"""Lint checks between a recipe's gates and its launch block (R026-R028): a gate the block cannot
serve, bars of one gate that contradict each other, a speed level the block's concurrency cannot
reach. Each returns diagnostics through lint's `diag(kind, key, problem, help)`."""

from __future__ import annotations

from typing import Any

from cookbook.recipe import errors as E

# How far two implied spec_acceptance bars may differ before one of them is inert: two decimals on
# each bar (`serve --calibrate` floors both to 0.01), so up to 0.01 x (k + 1) apart.
IMPLIED_TOLERANCE = 0.01
# Drafters that propose exactly k tokens every step, so that vLLM's draft tokens = drafts x k and the
# mean acceptance length is 1 + k x rate. n-gram lookup proposes fewer where the prompt has no
# match, so its two figures are independent (and both may carry a bar).
FIXED_K_METHODS = {"mtp", "deepseek_mtp", "dspark", "eagle", "eagle3", "medusa", "draft_model"}


def _args(recipe) -> dict[str, Any]:
    return {k: s.value for k, s in recipe.serve.args.items() if s.value is not None}


def _projector_loaded(recipe, args: dict[str, Any]) -> bool:
    """The launch block names the vision projector's file (an include pattern's fixed part)."""
    proj = recipe.model.extras.get("vision_projector")
    if proj is None:
        return True  # the vision tower is in the checkpoint itself
    words = [recipe.serve.model or "", *(str(v) for v in args.values())]
    words += [str(s.value) for s in recipe.env.values() if s.value is not None]
    stems = [p.replace("*", "") for p in proj.include if p.replace("*", "")]
    return any(stem in w for stem in stems for w in words)


def servable(recipe, diag) -> list[E.Diagnostic]:
    g, args, arch = recipe.gates, _args(recipe), recipe.model.architecture
    out = []

    def bad(gate: str, problem: str, help: str) -> None:
        out.append(diag(E.GATE_NOT_SERVABLE, f"gates.{gate}", problem, help))

    if g.vision is not None:
        if not arch.vision:
            bad("vision", "a vision gate, but the model has no vision (model.architecture.vision)", "drop the gate")
        elif args.get("language_model_only"):
            bad("vision", "a vision gate, but the block serves the language model only", "drop the gate")
        elif not _projector_loaded(recipe, args):
            inc = ", ".join(recipe.model.extras["vision_projector"].include)
            bad(
                "vision",
                f"a vision gate, but the launch block does not load the vision projector ({inc}): "
                "no image request can be answered",
                "pass the projector in the launch block, or drop the gate and say why (a comment and known_issues)",
            )
    if g.tools is not None:
        needs_parser = [c for c in g.tools.cases if c != "json_schema"]
        if needs_parser and not args.get("tool_call_parser"):
            bad(
                "tools",
                f"a tools gate with tool_choice {', '.join(needs_parser)}, but no --tool-call-parser",
                "set serve.args.tool_call_parser, or test only cases: [json_schema]",
            )
        elif "auto" in g.tools.cases and args.get("enable_auto_tool_choice") is not True:
            bad("tools", "a tools gate with tool_choice auto, but no --enable-auto-tool-choice", "set it, or drop auto")
    if g.reasoning_split is not None and not args.get("reasoning_parser"):
        bad("reasoning_split", "a reasoning_split gate, but no --reasoning-parser", "set serve.args.reasoning_parser")
    if g.spec_acceptance is not None and not args.get("speculative_config"):
        bad(
            "spec_acceptance",
            "a spec_acceptance gate, but no --speculative-config: there is nothing to accept",
            "drop the gate (gates.spec_acceptance: null) or turn speculation on",
        )
    return out


def implied_bars(recipe, diag) -> list[E.Diagnostic]:
    cfg = recipe.gates.spec_acceptance
    spec = _args(recipe).get("speculative_config")
    k = spec.get("num_speculative_tokens") if isinstance(spec, dict) else None
    if cfg is None or not isinstance(k, int) or isinstance(k, bool) or k < 1:
        return []
    out = []
    rate, length = cfg.min_acceptance_rate, cfg.min_mean_acceptance_length
    if length > 1 + k + 1e-9:
        out.append(
            diag(
                E.GATE_BARS_DISAGREE,
                "gates.spec_acceptance.min_mean_acceptance_length",
                f"min_mean_acceptance_length {length} can never be met: with {k} draft tokens the mean "
                f"acceptance length is at most {1 + k}",
                f"use a bar of at most {1 + k}",
            )
        )
    elif (
        spec.get("method") in FIXED_K_METHODS
        and {
            "min_acceptance_rate",
            "min_mean_acceptance_length",
        }
        <= cfg.model_fields_set
    ):
        implied = 1 + k * rate
        if abs(length - implied) > IMPLIED_TOLERANCE * (k + 1) + 1e-9:
            inert = "min_acceptance_rate" if length > implied else "min_mean_acceptance_length"
            out.append(
                diag(
                    E.GATE_BARS_DISAGREE,
                    "gates.spec_acceptance",
                    f"min_mean_acceptance_length {length} and min_acceptance_rate {rate} disagree: with {k} draft "
                    f"tokens the mean length is 1 + {k} x rate, so rate {rate} implies {implied:.3f} and length "
                    f"{length} implies rate {(length - 1) / k:.3f}; {inert} is inert",
                    "keep the bar the source states and set the other to what it implies",
                )
            )
    return out


def speed_levels(recipe, diag) -> list[E.Diagnostic]:
    cfg, args = recipe.gates.speed, _args(recipe)
    seqs = args.get("max_num_seqs")
    if cfg is None or cfg.beyond_max_num_seqs or not isinstance(seqs, int) or isinstance(seqs, bool):
        return []
    dp = args.get("data_parallel_size")
    admitted = seqs * (dp if isinstance(dp, int) and not isinstance(dp, bool) and dp > 1 else 1)
    over = sorted(c for c in cfg.sweep_concurrencies if c > admitted)
    if not over:
        return []
    return [
        diag(
            E.SPEED_BEYOND_SEQS,
            "gates.speed.sweep_concurrencies",
            f"sweep level(s) {over} exceed the {admitted} concurrent requests the block admits "
            f"(max_num_seqs {seqs}" + (f" x data_parallel_size {dp}" if admitted != seqs else "") + ")",
            "drop the level and report its figure, raise max_num_seqs, or quote the source that measured it so "
            "in gates.speed.beyond_max_num_seqs",
        )
    ]


def check(recipe, diag) -> list[E.Diagnostic]:
    if recipe.abstract:
        return []
    return servable(recipe, diag) + implied_bars(recipe, diag) + speed_levels(recipe, diag)
