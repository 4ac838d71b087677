"""`cookbook plan`: will the recipe fit its GPUs, and with how much context and concurrency."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cookbook.cli_options import quant_option, resolve_or_refuse, set_option
from cookbook.errors import BAD_INPUT, CookbookError
from cookbook.recipe.model import MAX_GPUS

MAX_CTX = 2**31 - 1  # vLLM keeps token positions in int32
MAX_DEVICE_MIB = 2**24  # 16 TiB per device


def plan_sets(resolved, sets, gpus=None, ctx=None, seqs=None) -> list[str]:
    """--ctx/--seqs/--gpus as the --set items they stand for, so the recipe's rules judge the
    configuration the plan is for (as `show --set` would)."""
    from cookbook.plan.budget import split_gpus

    out = list(sets)
    if ctx:
        out.append(f"serve.args.max_model_len={ctx}")
    if seqs:
        out.append(f"serve.args.max_num_seqs={seqs}")
    if gpus:
        tp, dp = split_gpus(resolved, gpus)
        out += [f"hardware.gpus={gpus}", f"serve.args.tensor_parallel_size={tp}"]
        if dp != int(resolved.recipe.serve.arg("data_parallel_size", 1) or 1):
            out.append(f"serve.args.data_parallel_size={dp}")
    return out


def plan_for(slug, quant, sets, **kw):
    from cookbook.plan.budget import make_plan

    action = f"cannot plan {slug}"
    as_written = resolve_or_refuse(slug, quant, sets, action) if kw.get("gpus") else None
    if as_written is not None and (kw.get("platform") or as_written.recipe.hardware.platform) == "cpu":
        raise CookbookError(
            f"--gpus {kw['gpus']}: {slug} is planned on the cpu platform, which has no GPUs",
            help="leave --gpus out, or plan on a GPU platform with --platform (e.g. --platform h200)",
            exit_code=BAD_INPUT,
        )
    extra = plan_sets(as_written, sets, kw.get("gpus"), kw.get("ctx"), kw.get("seqs"))
    return make_plan(resolve_or_refuse(slug, quant, extra, action), **kw)


@click.command("plan")
@click.argument("slug")
@quant_option
@set_option
@click.option(
    "--gpus", type=click.IntRange(1, MAX_GPUS), help="Plan for N GPUs (one TP group of N) instead of the recipe's."
)
@click.option("--ctx", type=click.IntRange(1, MAX_CTX), help="max_model_len to plan for (default: the recipe's).")
@click.option("--seqs", type=click.IntRange(1, 2**20), help="Concurrent sequences to plan for (default: max_num_seqs).")
@click.option(
    "--checkpoint",
    type=click.Path(path_type=Path),
    help="A GGUF file, a safetensors file or a folder of shards: weights from its tensor table.",
)
@click.option("--platform", help="Plan on another platform of the catalogue (e.g. h200).")
@click.option(
    "--device-mib",
    type=click.IntRange(1, MAX_DEVICE_MIB),
    help="Total device memory in MiB, as the runtime reports it.",
)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output (its schema: cookbook.plan.render).")
def plan_cmd(slug, quant, sets, gpus, ctx, seqs, checkpoint, platform, device_mib, as_json):
    """Per GPU: weights by tensor group, KV bytes per token, reserves, the KV pool, and the
    largest context and concurrency that fit. Refuses (exit 2, naming the numbers that decide, before any
    table) what does not fit.

    \b
      cookbook plan glm52-2                      # the recipe as written
      cookbook plan glm52-2 --quant Q4_K         # refused: the weights do not fit two GPUs
      cookbook plan glm52-4 --ctx 1048576 --seqs 4
      cookbook plan gemma3-270m-cpu --checkpoint model.gguf --platform h200 --set gpu_memory_utilization=0.9
    """
    from cookbook.plan.render import as_json as to_json
    from cookbook.plan.render import as_text

    p = plan_for(
        slug,
        quant,
        sets,
        gpus=gpus,
        ctx=ctx,
        seqs=seqs,
        checkpoint=checkpoint,
        platform=platform,
        device_mib=device_mib,
    )
    # A plan that does not fit is refused before its table (no negative pool or "-9 fit at once" is
    # printed as a figure); with --json the refusal is one document, the error object with the plan in it.
    if p.fits:
        click.echo(json.dumps(to_json(p), indent=2) if as_json else as_text(p).rstrip())
    if not p.fits:
        raise CookbookError(
            f"{slug}" + (f" --quant {p.quant}" if p.quant else "") + " does not fit: " + "; ".join(p.refusals),
            help=(
                "a smaller --set env.VLLM_CPU_KVCACHE_SPACE (GiB), or a host with more memory"
                if p.setup.platform == "cpu"
                else f"--ctx {p.max_ctx_at_seqs} fits {p.setup.max_num_seqs} sequence(s); or fewer --seqs, more --gpus"
                if p.max_ctx_at_seqs
                else "a smaller quant or more --gpus"
            ),
            exit_code=BAD_INPUT,
            details={"plan": to_json(p)} if as_json else None,
        )
