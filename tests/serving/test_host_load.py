"""HostLoad reads real counters: a busy process shows near one core, an idle one near none; without a
GPU driver the GPU figures are None with the reason; on a GPU a running loop of kernels shows busy."""

import subprocess
import time

import pytest

from cookbook.serving.host_load import HostLoad

pytest.importorskip("psutil")


def _group(script: str) -> subprocess.Popen:
    """A shell with one child, as a server's launch block holds its engine."""
    return subprocess.Popen(["bash", "-c", f"{script} & wait"], start_new_session=True)


def _measure(proc: subprocess.Popen, seconds: float) -> dict:
    with HostLoad([proc.pid], interval_s=0.05) as load:
        time.sleep(seconds)
    return load.summary


def test_the_busiest_server_process_shows_its_cpu_time():
    busy = _group("python3 -c 'while True: pass'")
    idle = _group("sleep 300")
    try:
        time.sleep(0.5)  # both children started
        hot, cold = _measure(busy, 1.5), _measure(idle, 1.5)
    finally:
        for p in (busy, idle):
            subprocess.run(["pkill", "-g", str(p.pid)], check=False)
            p.wait()
    # one spinning thread is one core; a loaded 2-core CI machine gives it less, never as little as idle
    assert hot["server_cpu_pct"] > 40, hot
    assert cold["server_cpu_pct"] < 5, cold
    assert 0 < hot["cpu_busy_pct"] <= 100 and 0 <= hot["cpu_steal_pct"] <= 100
    assert hot["wall_s"] >= 1.5


def test_no_processes_still_gives_the_machine_figures():
    with HostLoad([999_999_999]) as load:  # no such process
        time.sleep(0.3)
    assert load.summary["server_cpu_pct"] is None and load.summary["cpu_busy_pct"] is not None


def _cuda() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.mark.skipif(_cuda(), reason="this machine has a GPU: test_a_kernel_loop_shows_the_gpu_busy covers it")
def test_without_a_gpu_the_gpu_figures_say_why():
    proc = _group("sleep 5")
    s = _measure(proc, 0.3)
    subprocess.run(["pkill", "-g", str(proc.pid)], check=False)
    proc.wait()
    assert s["gpu_busy_pct"] is None and s["sm_clock_mhz"] is None and s["gpu_samples"] == 0
    assert s["gpu_note"], "no reason given for the missing GPU figures"


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU and vLLM's NVML binding")
def test_a_kernel_loop_shows_the_gpu_busy():
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    with HostLoad(interval_s=0.05) as idle:
        time.sleep(1.5)
    with HostLoad(interval_s=0.05) as busy:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
    assert busy.summary["gpu_samples"] > 10 and busy.summary["sm_clock_mhz"] > 0
    assert busy.summary["gpu_busy_pct"] > 80, busy.summary
    assert idle.summary["gpu_busy_pct"] < 20, idle.summary
