"""Opcode histogram of the compiled MoE kernels in a Triton cache (GPU machine: needs cuobjdump).

    TRITON_CACHE_DIR=/tmp/tc python benchmarks/mxfp4_moe/bench.py ...
    python benchmarks/mxfp4_moe/sass_summary.py /tmp/tc > sass.txt

For each cached `_w13_silu_kernel` / `_w2_kernel` cubin: its launch metadata, instruction
count and the most frequent opcodes, so that decode, repacking (PRMT, SHFL, shared-memory
traffic) and tensor-core (HGMMA/HMMA) instructions can be compared between configs.
"""

import collections
import json
import subprocess
import sys
from pathlib import Path

from sass import instructions, opcode


def main() -> int:
    cache = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/tc")
    for cubin in sorted(cache.rglob("*.cubin")):
        if not cubin.stem.startswith(("_w13_silu_kernel", "_w2_kernel", "_w13_frag_kernel", "_w2_frag_kernel")):
            continue
        meta = {}
        js = cubin.with_suffix(".json")
        if js.is_file():
            m = json.loads(js.read_text())
            meta = {k: m.get(k) for k in ("name", "num_warps", "num_stages", "shared") if k in m}
        sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
        ops = collections.Counter(opcode(i) for _, i in instructions(sass))
        total = sum(ops.values())
        top = ", ".join(f"{k} {v}" for k, v in ops.most_common(18))
        print(f"{cubin.parent.name[:12]} {meta} total {total}: {top}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
