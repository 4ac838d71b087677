"""A recipe page's "Will it fit" section: the memory plan (cookbook.plan.budget.make_plan, the
function `cookbook plan` calls) as a few figures per GPU, with the command's own text collapsed."""

from __future__ import annotations

from cookbook.errors import CookbookError
from cookbook.plan.budget import make_plan
from cookbook.plan.render import as_text
from cookbook.units import gib


def plan_lines(resolved) -> list[str]:
    slug = resolved.slug
    quant = f" --quant {resolved.quant}" if resolved.quant else ""
    command = f"cookbook plan {slug}{quant}"
    lines = ["## Will it fit", ""]
    try:
        p = make_plan(resolved)
    except CookbookError as exc:
        return lines + [f"`{command}` cannot plan this recipe: {exc.format_message()}", ""]
    s = p.setup
    where = f"{s.gpus}x {s.platform}" if s.gpus else s.platform
    lines += [f"`{command}` plans it per GPU ({where}, TP {s.tp}" + (f" x DP {s.dp}" if s.dp > 1 else "") + "):", ""]
    rows = [
        ("device memory", gib(s.device_bytes)),
        ("weights", gib(p.weights_per_gpu_bytes) + f" (from {p.weights.source})"),
        ("left after weights", gib(p.left_after_weights_bytes)),
        ("KV per token", f"{p.kv.bytes_per_token:,.0f} B" if p.kv.bytes_per_token else "not counted"),
        (
            "KV pool",
            gib(p.pool_bytes) + (f" ({p.pool_tokens:,} tokens)" if p.pool_tokens > 0 else ""),
        ),
    ]
    if p.max_ctx_at_seqs > 0:
        rows.append(
            (
                f"largest context at {s.max_num_seqs} sequences",
                f"{p.max_ctx_at_seqs:,} tokens (the recipe sets {s.max_model_len:,})",
            )
        )
    if p.full_length is not None and p.full_length.seqs > 0:
        rows.append(
            (
                f"full-length sequences ({s.max_model_len:,} tokens) running at once, none preempted",
                f"{p.full_length.seqs:,}",
            )
        )
    elif p.max_seqs_at_ctx > 0:
        rows.append((f"sequences of {s.max_model_len:,} tokens at once", f"{p.max_seqs_at_ctx:,}"))
    if p.typical is not None and p.traffic is not None:
        t = p.traffic
        rows.append(
            (
                f"typical requests ({t.prompt_tokens:,} + {t.output_tokens:,} tokens) running at once",
                f"{p.typical.seqs:,}; max_num_seqs {s.max_num_seqs} (typical request: {t.source})",
            )
        )
    lines += ["| figure | per GPU |", "|---|---|"] + [f"| {k} | {v} |" for k, v in rows] + [""]
    if not p.fits:
        lines += ["**It does not fit as written:** " + "; ".join(p.refusals), ""]
    lines += [f'??? note "The whole plan (`{command}`)"', "", "    ```text"]
    lines += [("    " + ln).rstrip() for ln in as_text(p).rstrip().splitlines()]
    lines += ["    ```", ""]
    return lines
