"""Machine code of the frag expert kernels' inner loop (Triton and Gluon), compiled for sm_90 on this
machine (no GPU needed).

    python benchmarks/mxfp4_moe/sass_local.py [--json]

Prints, per kernel and block shape: instructions per decoded weight, registers, and the
loop's opcode mix (HGMMA/HMMA: tensor core; LDSM/BAR: a shared-memory shuffle of the tile).
Must run without TRITON_INTERPRET (it unsets it for itself).
"""

import argparse
import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)  # before triton is imported: the interpreter compiles nothing

SHAPES = [("w13", 64, 128, 4), ("w2", 64, 128, 4), ("w13", 128, 128, 4), ("w2", 128, 128, 4), ("w13", 64, 256, 4)]
# Gluon kernels (one row group per warp: block_n = 16 * warps), token blocks of 8 and 16
GLUON_SHAPES = [
    ("w13", 64, 128, 4, 8),
    ("w2", 64, 128, 4, 8),
    ("w13", 128, 128, 8, 8),
    ("w13", 64, 128, 4, 16),
    ("w2", 32, 128, 2, 8),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="one JSON object per line")
    args = ap.parse_args()
    from sass import loop_report

    rows = [("triton", k, bn, bk, w, None) for k, bn, bk, w in SHAPES]
    rows += [("gluon", k, bn, bk, w, bt) for k, bn, bk, w, bt in GLUON_SHAPES]
    for engine, kernel, bn, bk, warps, bt in rows:
        r = loop_report(kernel, bn, bk, warps, engine=engine, **({"block_t": bt} if bt else {}))
        if args.json:
            print(
                json.dumps(
                    {
                        "engine": engine,
                        "kernel": kernel,
                        "block_n": bn,
                        "block_k": bk,
                        "warps": warps,
                        "block_t": bt,
                        "per_weight": round(r.per_weight, 3),
                        "registers": r.registers,
                        "opcodes": dict(r.opcodes),
                    }
                )
            )
        else:
            top = ", ".join(f"{k} {v}" for k, v in r.opcodes.most_common(10))
            print(
                f"{engine:6s} {kernel} block_n={bn} block_k={bk} warps={warps}"
                + (f" block_t={bt}" if bt else "")
                + f": {r.per_weight:.2f} instr/weight, {r.registers} regs; {top}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
