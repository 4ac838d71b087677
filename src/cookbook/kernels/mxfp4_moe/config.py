"""Launch configurations of the MXFP4 MoE kernels: one JSON table per model family.

A table maps a batch size (tokens) to block sizes for the two expert kernels. The kernel
picks the entry of the smallest listed batch size >= the call's, else the largest.
Tables are written by `python benchmarks/mxfp4_moe/bench.py --tune` on the GPU and shipped in
`configs/<variant>.json`; `kernels/mxfp4-moe/build.sh --variant V` validates and prints one.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from .shapes import VARIANTS

CONFIG_DIR = Path(__file__).with_name("configs")
SCHEMA = "cookbook.mxfp4-moe.config/1"
ENV_CONFIG = "COOKBOOK_MXFP4_MOE_CONFIG"  # path of a tuned table that replaces the shipped one
DECODERS = ("fp32", "asm", "dot_scaled", "asm_split")  # index = the kernels' DECODE constexpr
KERNELS = ("triton", "gluon")


class ConfigError(ValueError):
    """A tuned-config table that cannot be used (names the file and the key)."""


@dataclass(frozen=True)
class LaunchConfig:
    block_t: int = 16  # pairs (token, expert) per block; MMA N dim
    block_n1: int = 64  # w13 output rows per program (each of gate and up)
    block_k1: int = 128  # K step over H
    warps1: int = 4
    stages1: int = 3
    block_n2: int = 64  # w2 output rows per program
    block_k2: int = 128  # K step over I
    warps2: int = 4
    stages2: int = 3
    split1: int = 1  # w13: programs sharing one row tile's K steps (split-K, any count; partial sums reduced after)
    split2: int = 1  # w2: the same; the top-k sum adds the partials
    prefetch: int = 0  # frag layout: ask L2 for the tile this many K steps ahead (0: off); kernel gluon:
    # K steps of words held in registers ahead of the one decoded (1 or 2)
    prefetch2: int = 0  # kernel gluon: w2's register depth when > 0 (else prefetch's)
    pdl: bool = False  # frag layout: programmatic dependent launch; each kernel starts while the one
    # before finishes (Gluon w2 loads its first words before it waits)
    kernel: str = "triton"  # frag layout: "triton" (wgmma, runs in the CPU interpreter too) or "gluon"
    # (gluon_kernels.py: mma.sync, no shared memory; GPU only; one row group
    # per warp: block_n = 16 * warps; block_t 8 or 16)
    fuse: bool = False  # frag layout: no reduce and no top-k sum launch; the last program of a tile
    # (atomic counter) adds the split-K partials / the top-k rows, in the same order
    taper: bool = False  # kernel gluon with split-K: earlier splits longer (the GPU starts split 0 first),
    # so the programs that start last, and end the launch, are short
    direct: bool = False  # kernel gluon: no align launch; each of the t k pairs is its own block and the kernels
    # read its expert from topk_ids (an expert two tokens share is read once per pair; with
    # fuse the counters come from the caller's workspace, or one fill launch zeroes them)
    streams: int = 1  # kernel gluon, 2-4: a direct, fused call (no trace) splits its pairs in that many parts,
    # each its w13 then its w2 on a stream of its own, so one part's launches run in another's
    # ramp and tail; other calls run on one stream (their reduce and top-k launches need all pairs)
    decoder: str = "fp32"  # fp32: _dequant_tile (also runs in the CPU interpreter);
    # asm: inline-PTX BF16 decoder; asm_split: the same, even/odd K in two dots;
    # dot_scaled: Triton's tl.dot_scaled (all three GPU only)

    def check(self, where: str) -> None:
        def pow2(v: int) -> bool:
            return v > 0 and v & (v - 1) == 0

        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "decoder":
                if v not in DECODERS:
                    raise ConfigError(f"{where}: decoder must be one of {', '.join(DECODERS)}, got {v!r}")
                continue
            if f.name == "kernel":
                if v not in KERNELS:
                    raise ConfigError(f"{where}: kernel must be one of {', '.join(KERNELS)}, got {v!r}")
                continue
            if f.type in (bool, "bool"):
                if not isinstance(v, bool):
                    raise ConfigError(f"{where}: {f.name} must be true or false, got {v!r}")
                continue
            # split counts need not be powers of two: any count fills the card in whole waves better
            if (
                not isinstance(v, int)
                or isinstance(v, bool)
                or not pow2(v)
                and f.name not in ("stages1", "stages2", "prefetch", "prefetch2", "split1", "split2", "streams")
            ):
                raise ConfigError(f"{where}: {f.name} must be a power of two, got {v!r}")
        if self.block_t < (8 if self.kernel == "gluon" else 16) or self.block_n1 < 16 or self.block_n2 < 16:
            raise ConfigError(
                f"{where}: block_t (8 with kernel gluon), block_n1 and block_n2 must be >= 16 (tensor-core tile)"
            )
        if self.kernel == "gluon":
            if self.block_t > 16 or self.block_n1 != 16 * self.warps1 or self.block_n2 != 16 * self.warps2:
                raise ConfigError(
                    f"{where}: kernel gluon takes block_t 8 or 16 and one row group per warp: "
                    f"block_n1 = 16 * warps1, block_n2 = 16 * warps2 (got block_t={self.block_t}, "
                    f"{self.block_n1}/{self.warps1}, {self.block_n2}/{self.warps2})"
                )
            if self.decoder != "asm" or self.prefetch not in (1, 2) or self.prefetch2 not in (0, 1, 2):
                raise ConfigError(
                    f"{where}: kernel gluon runs decoder asm and keeps prefetch = 1 or 2 K steps "
                    f"of words in registers, prefetch2 0..2 (got {self.decoder!r}, {self.prefetch}, "
                    f"{self.prefetch2})"
                )
        if not 1 <= self.streams <= 4 or self.streams > 1 and self.kernel != "gluon":
            raise ConfigError(f"{where}: streams must be 1, or 2-4 with kernel gluon, got {self.streams}")
        gluon_only = [n for n in ("taper", "direct") if getattr(self, n)]
        if gluon_only and self.kernel != "gluon":
            raise ConfigError(f"{where}: {', '.join(gluon_only)} need kernel gluon, got {self.kernel!r}")
        if self.block_k1 < 32 or self.block_k2 < 32:
            raise ConfigError(f"{where}: block_k1 and block_k2 must be >= 32 (one MXFP4 scale block)")
        if not 1 <= self.split1 <= 64 or not 1 <= self.split2 <= 64:
            raise ConfigError(f"{where}: split1/split2 must be 1..64")
        if not 0 <= self.prefetch <= 4:
            raise ConfigError(f"{where}: prefetch must be 0..4 (K steps ahead), got {self.prefetch}")
        if not 1 <= self.stages1 <= 8 or not 1 <= self.stages2 <= 8:
            raise ConfigError(f"{where}: stages1/stages2 must be 1..8")


def _parse_table(data: object, where: str) -> dict[int, LaunchConfig]:
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise ConfigError(f'{where}: not a tuned-config table (expected "schema": "{SCHEMA}")')
    table = data.get("configs")
    if not isinstance(table, dict) or not table:
        raise ConfigError(f'{where}: "configs" must map batch sizes to block sizes')
    known = {f.name for f in fields(LaunchConfig)}
    out: dict[int, LaunchConfig] = {}
    for key, entry in table.items():
        if not str(key).isdigit() or int(key) < 1:
            raise ConfigError(f"{where}: configs key {key!r} is not a batch size (positive integer)")
        if not isinstance(entry, dict):
            raise ConfigError(f"{where}: configs[{key}] must be an object")
        unknown = sorted(set(entry) - known)
        if unknown:
            raise ConfigError(f"{where}: configs[{key}] has unknown keys {unknown}; known: {sorted(known)}")
        cfg = LaunchConfig(**entry)
        cfg.check(f"{where}: configs[{key}]")
        out[int(key)] = cfg
    return dict(sorted(out.items()))


def load_table(variant: str, path: Path | None = None) -> dict[int, LaunchConfig]:
    if variant not in VARIANTS:
        raise ConfigError(f"unknown variant {variant!r}; choose one of {', '.join(sorted(VARIANTS))}")
    path = path or CONFIG_DIR / f"{variant}.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no tuned-config table for variant {variant!r}") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from None
    if data.get("variant") != variant:
        raise ConfigError(f'{path}: "variant" is {data.get("variant")!r}, expected {variant!r}')
    return _parse_table(data, str(path))


def load_for_serving(variant: str) -> dict[int, LaunchConfig]:
    """The table the kernel runs with: $COOKBOOK_MXFP4_MOE_CONFIG if set, else the shipped one."""
    env = os.environ.get(ENV_CONFIG)
    return load_table(variant, Path(env) if env else None)


def pick(table: dict[int, LaunchConfig], tokens: int) -> LaunchConfig:
    for batch, cfg in table.items():
        if batch >= tokens:
            return cfg
    return table[max(table)]


def table_json(variant: str, table: dict[int, LaunchConfig], meta: dict | None = None) -> str:
    data = {
        "schema": SCHEMA,
        "variant": variant,
        **(meta or {}),
        "configs": {str(b): asdict(c) for b, c in sorted(table.items())},
    }
    return json.dumps(data, indent=2) + "\n"
