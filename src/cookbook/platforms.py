"""The platform catalogue, and what this machine has.

One entry per accelerator the cookbook names. Used to refuse with reasons and by
`cookbook list` to say whether a recipe can run here. Detection only reads /proc and asks
the vendor tools that are present; it never imports a framework.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class Platform:
    id: str
    name: str
    vendor: str  # amd | nvidia | intel | cpu
    arch: str  # gfx942, sm80, sm90, sm120, hpu, cpu
    memory_gib: float | None  # per device; None for cpu (host RAM is what counts)
    cannot: tuple[str, ...] = field(default=())  # what this platform cannot run, with why
    # Total device memory as the runtime reports it (torch.cuda.mem_get_info's total), in MiB:
    # what vLLM multiplies by gpu_memory_utilization. The planner's input (cookbook.plan).
    device_mib: int | None = None
    # Where memory_gib (the vendor's per-device figure) comes from; empty for the older entries.
    memory_source: str = ""


# device_mib per platform, and where the figure comes from.
DEVICE_MIB = {
    "h100": (
        81079,
        "measured: torch.cuda.mem_get_info's total on an H100 80GB HBM3 (SXM5), driver 580.159.04, 2026-12-08 "
        "(nvidia-smi shows 81,559 MiB; the figure derived before from the H200's gap was 80,944)",
    ),
    "h200": (
        143156,
        "measured: torch.cuda.mem_get_info's total on this project's H200, 2026-12-01 (nvidia-smi shows 143,771 MiB)",
    ),
    "mi300x": (196288, "ROCm's total for the 192 GB part (205,822,885,888 B); not measured here"),
    "a100-80gb": (81920, "nvidia-smi's total for the 80 GB part; not measured here"),
    "a100-40gb": (40960, "nvidia-smi's total for the 40 GB part; not measured here"),
    "rtx-pro-6000": (97887, "nvidia-smi's total for the 96 GB Blackwell workstation part; not measured here"),
    "gaudi2": (98304, "hl-smi's total for the 96 GB part; not measured here"),
}


CATALOGUE: dict[str, Platform] = {
    p.id: p
    for p in (
        Platform("mi300x", "AMD Instinct MI300X", "amd", "gfx942", 192, ("CUDA-only kernels (FlashInfer, Marlin)",)),
        Platform(
            "a100-80gb",
            "NVIDIA A100 80GB",
            "nvidia",
            "sm80",
            80,
            ("FP8 tensor cores (sm89+)", "FP4 tensor cores (sm100+)"),
        ),
        Platform(
            "a100-40gb",
            "NVIDIA A100 40GB",
            "nvidia",
            "sm80",
            40,
            ("FP8 tensor cores (sm89+)", "FP4 tensor cores (sm100+)"),
        ),
        Platform(
            "h100",
            "NVIDIA H100 80GB",
            "nvidia",
            "sm90",
            80,
            ("FP4 tensor cores (sm100+)",),
            memory_source="NVIDIA H100 Tensor Core GPU datasheet: 80 GB HBM3 (SXM5) per GPU",
        ),
        Platform(
            "h200",
            "NVIDIA H200",
            "nvidia",
            "sm90",
            141,
            ("FP4 tensor cores (sm100+)",),
            memory_source="NVIDIA H200 Tensor Core GPU datasheet: 141 GB HBM3e per GPU (4.8 TB/s)",
        ),
        Platform(
            "rtx-pro-6000",
            "NVIDIA RTX PRO 6000 Blackwell",
            "nvidia",
            "sm120",
            96,
            ("datacenter sm100 kernels (tcgen05, TMEM)",),
        ),
        Platform("gaudi2", "Intel Gaudi 2", "intel", "hpu", 96, ("CUDA and ROCm kernels; needs vllm-gaudi",)),
        Platform("cpu", "CPU (x86-64)", "cpu", "cpu", None, ("GGUF serving (vLLM's GGUF dequant kernels need CUDA)",)),
    )
}
CATALOGUE = {k: replace(p, device_mib=DEVICE_MIB.get(k, (None, ""))[0]) for k, p in CATALOGUE.items()}


def get(platform_id: str) -> Platform | None:
    return CATALOGUE.get(platform_id)


@dataclass(frozen=True)
class LocalMachine:
    platform: str  # catalogue id of the accelerators found ("cpu" when none)
    devices: int
    device_memory_gib: float | None
    host_memory_gib: float
    description: str


def _host_memory_gib() -> float:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) / (1 << 20)
    except OSError:
        pass
    return 0.0


def _nvidia() -> tuple[str, int, float] | None:
    if not shutil.which("nvidia-smi"):
        return None
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [r.split(",") for r in out.strip().splitlines() if "," in r]
    if not rows:
        return None
    name, mem_mib = rows[0][0].strip(), float(rows[0][1])
    lowered = name.lower()
    if "h200" in lowered:
        pid = "h200"
    elif "h100" in lowered and mem_mib > 70_000:
        pid = "h100"
    elif "a100" in lowered:
        pid = "a100-80gb" if mem_mib > 50_000 else "a100-40gb"
    elif "rtx pro 6000" in lowered:
        pid = "rtx-pro-6000"
    else:
        pid = f"nvidia:{name}"
    return pid, len(rows), mem_mib / 1024


def _amd() -> tuple[str, int, float] | None:
    nodes = "/sys/class/kfd/kfd/topology/nodes"
    if not os.path.isdir(nodes):
        return None
    count = 0
    for node in os.listdir(nodes):
        try:
            with open(os.path.join(nodes, node, "properties")) as f:
                props = dict(line.split() for line in f if len(line.split()) == 2)
        except OSError:
            continue
        if props.get("gfx_target_version", "0") not in ("0", ""):
            count += 1
            gfx = int(props["gfx_target_version"])
    if not count:
        return None
    pid = "mi300x" if gfx // 100 == 904 and gfx % 100 == 2 else f"amd:gfx{gfx}"
    return pid, count, 192.0 if pid == "mi300x" else 0.0


def _gaudi() -> tuple[str, int, float] | None:
    if not shutil.which("hl-smi"):
        return None
    try:
        out = subprocess.run(
            ["hl-smi", "-Q", "name", "-f", "csv,noheader"], capture_output=True, text=True, timeout=10
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    rows = [r for r in out.splitlines() if r.strip()]
    return ("gaudi2", len(rows), 96.0) if rows else None


@functools.lru_cache(maxsize=1)
def detect() -> LocalMachine:
    """What this machine can run on. $COOKBOOK_PLATFORM=id:count overrides (for tests)."""
    host = _host_memory_gib()
    forced = os.environ.get("COOKBOOK_PLATFORM")
    if forced:
        pid, _, count = forced.partition(":")
        plat = CATALOGUE.get(pid)
        return LocalMachine(
            pid,
            int(count or 0),
            plat.memory_gib if plat else None,
            host,
            f"{count or 0}x {pid} (from $COOKBOOK_PLATFORM)",
        )
    for probe in (_nvidia, _amd, _gaudi):
        found = probe()
        if found:
            pid, count, mem = found
            return LocalMachine(pid, count, mem, host, f"{count}x {pid}, {mem:.0f} GiB each")
    return LocalMachine("cpu", 0, None, host, f"no accelerator, {host:.0f} GiB RAM")


def can_run(
    platform_id: str, gpus: int, min_host_memory_gib: float | None, here: LocalMachine | None = None
) -> tuple[bool, str]:
    """(runnable, reason) for a recipe's hardware on this machine."""
    here = here or detect()
    want = CATALOGUE.get(platform_id)
    want_name = want.name if want else platform_id
    if platform_id == "cpu":
        if min_host_memory_gib and here.host_memory_gib < min_host_memory_gib:
            return False, (f"needs {min_host_memory_gib:g} GiB RAM; this machine has {here.host_memory_gib:.0f} GiB")
        return True, "runs on the CPU"
    if here.platform != platform_id:
        have = "no accelerator" if here.platform == "cpu" else f"{here.devices}x {here.platform}"
        return False, f"needs {gpus}x {want_name}; this machine has {have}"
    if here.devices < gpus:
        return False, f"needs {gpus}x {want_name}; this machine has only {here.devices}"
    if want and want.memory_gib and here.device_memory_gib and here.device_memory_gib < want.memory_gib * 0.95:
        return False, (
            f"needs {want.memory_gib:g} GiB per device; this machine's have {here.device_memory_gib:.0f} GiB"
        )
    return True, f"{here.devices}x {here.platform} here"
