"""`kernels/mxfp4-moe/build.sh --variant V [--backend B]`: validate a variant, show its shapes and tuned table.

The backend is the platform's (`cookbook.kernel_catalogue`): sm90, the default, is the Triton/Gluon
kernel in this package; hpu (Gaudi) is not in this repository, and asking for it stops with one
message that says so, before anything is built. For sm90 it writes the table the kernel loads (configs/<variant>.json, validated) to --out if given and
prints it; with a CUDA GPU it also JIT-compiles the kernels once per listed batch size
(--warm), so the first serving call does not pay Triton's compile time.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from cookbook.files import atomic_write
from cookbook.kernel_catalogue import MXFP4_MOE

from .config import ENV_CONFIG, ConfigError, load_table, table_json
from .shapes import VARIANTS


def _fail(msg: str, help_: str) -> int:
    print(f"error: {msg}\n  help: {help_}", file=sys.stderr)
    return 2


def _write_atomic(path: Path, text: str) -> None:
    atomic_write(path, text)


def _warm(variant: str, table) -> str:
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as exc:
        return f"not warmed: {exc.name} is not installed"
    if not torch.cuda.is_available():
        return "not warmed: no CUDA GPU here (the kernels JIT-compile on their first call)"
    from .moe import fused_moe_mxfp4

    s = VARIANTS[variant]
    dev = "cuda"
    # zeros and a constant scale are the same tensors in either layout; warm the frag kernels,
    # the ones the tables are tuned for
    w = (
        torch.zeros(s.experts, 2 * s.intermediate, s.hidden // 2, dtype=torch.uint8, device=dev),
        torch.full((s.experts, 2 * s.intermediate, s.hidden // 32), 127, dtype=torch.uint8, device=dev),
        torch.zeros(s.experts, s.hidden, s.intermediate // 2, dtype=torch.uint8, device=dev),
        torch.full((s.experts, s.hidden, s.intermediate // 32), 127, dtype=torch.uint8, device=dev),
    )
    for batch, cfg in table.items():
        x = torch.zeros(batch, s.hidden, dtype=torch.bfloat16, device=dev)
        ids = torch.arange(batch * s.top_k, device=dev, dtype=torch.int32).remainder(s.experts).view(batch, s.top_k)
        fused_moe_mxfp4(x, *w, torch.ones(batch, s.top_k, device=dev), ids, config=cfg, scale_max=127, layout="frag")
    torch.cuda.synchronize()
    return f"warmed: compiled for batch sizes {list(table)} on {torch.cuda.get_device_name()}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="kernels/mxfp4-moe/build.sh",
        description="Select the MXFP4 MoE kernel's shapes and tuned configs for a model family.",
    )
    ap.add_argument("--variant", required=True, metavar="V", help=f"one of: {', '.join(sorted(VARIANTS))}")
    ap.add_argument(
        "--backend",
        default="sm90",
        metavar="B",
        help="the platform's backend: "
        + ", ".join(f"{b.id} ({', '.join(MXFP4_MOE.platforms_of(b))})" for b in MXFP4_MOE.backends)
        + "; default sm90",
    )
    ap.add_argument(
        "--config", type=Path, default=None, help=f"tuned table to use instead of the shipped one (also: ${ENV_CONFIG})"
    )
    ap.add_argument("--out", type=Path, default=None, help="also write the validated table here")
    ap.add_argument("--warm", action="store_true", help="JIT-compile the kernels now (needs a CUDA GPU)")
    args = ap.parse_args(argv)
    backend = MXFP4_MOE.backend(args.backend)
    if backend is None:
        return _fail(
            f"--backend {args.backend!r} is not a backend of mxfp4-moe",
            "use one of: " + ", ".join(b.id for b in MXFP4_MOE.backends),
        )
    if backend.missing:
        return _fail(
            f"the mxfp4-moe {backend.id} backend ({backend.what}) is not in this repository: {backend.missing}",
            f"until then use the kernels of the image that provides them; --backend sm90 is the "
            f"NVIDIA Hopper kernel and does not run on {', '.join(MXFP4_MOE.platforms_of(backend))}",
        )
    if args.variant not in VARIANTS:
        return _fail(
            f"--variant {args.variant!r} is not a known model family",
            f"use one of: {', '.join(sorted(VARIANTS))} (glm = GLM-5.2, dsv4 = DeepSeek-V4-Flash, k3 = Kimi K3)",
        )
    path = args.config or (Path(os.environ[ENV_CONFIG]) if os.environ.get(ENV_CONFIG) else None)
    try:
        table = load_table(args.variant, path)
    except ConfigError as exc:
        return _fail(
            str(exc),
            "regenerate it with: python benchmarks/mxfp4_moe/bench.py --tune --variants "
            f"{args.variant} --out DIR (on the GPU)",
        )
    s = VARIANTS[args.variant]
    for batch, cfg in table.items():
        if s.hidden % cfg.block_k1 or s.intermediate % cfg.block_k2:
            return _fail(
                f"configs[{batch}]: block_k1={cfg.block_k1}/block_k2={cfg.block_k2} do not divide "
                f"H={s.hidden}/I={s.intermediate}",
                "pick block sizes that divide the shapes",
            )
    text = table_json(
        args.variant,
        table,
        {
            "shapes": {
                "experts": s.experts,
                "hidden": s.hidden,
                "intermediate": s.intermediate,
                "top_k": s.top_k,
                "source": s.source,
            }
        },
    )
    if args.out:
        _write_atomic(args.out, text)
    print(
        f"# {s.family}: E={s.experts} H={s.hidden} I={s.intermediate} top-{s.top_k}; "
        f"{s.expert_bytes() / 2**20:.1f} MiB of MXFP4 weights per expert",
        file=sys.stderr,
    )
    print(text, end="")
    if args.warm:
        print(f"# {_warm(args.variant, table)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
