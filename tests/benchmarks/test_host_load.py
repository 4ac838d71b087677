"""benchmarks/host_load.py reads real counters: a busy process shows near one core, an idle one near none;
without a GPU driver the GPU figures are None with the reason; on a GPU a running loop of kernels shows busy."""

import subprocess
import time

import benchmark_scripts
import pytest

host_load = benchmark_scripts.load("host_load")
HostLoad, window_mean = host_load.HostLoad, host_load.window_mean

pytest.importorskip("psutil")


def _binding():
    """vLLM's NVML binding, as the A/B hands it in (the CPU engine ships the same file)."""
    return pytest.importorskip("vllm.third_party.pynvml")


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
    with HostLoad([proc.pid], _binding(), interval_s=0.05) as load:
        time.sleep(0.3)
    s = load.summary
    subprocess.run(["pkill", "-g", str(proc.pid)], check=False)
    proc.wait()
    assert s["gpu_busy_pct"] is None and s["sm_clock_mhz"] is None and s["gpu_samples"] == 0
    assert "NVML" in s["gpu_note"], "no reason given for the missing GPU figures"
    with HostLoad() as load:
        pass
    assert load.summary["gpu_note"] == "no GPU figures: no NVML binding given"


@pytest.mark.skipif(not _cuda(), reason="needs a CUDA GPU and vLLM's NVML binding")
def test_a_kernel_loop_shows_the_gpu_busy():
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    torch.cuda.synchronize()
    nvml = _binding()
    with HostLoad(nvml=nvml, interval_s=0.05) as idle:
        time.sleep(1.5)
    with HostLoad(nvml=nvml, interval_s=0.05) as busy:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.5:
            for _ in range(20):
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()
    assert busy.summary["gpu_samples"] > 3 and busy.summary["sm_clock_mhz"] > 0
    # on the H200 this loop read 82.6% with the periods straddling its edges counted (polling the current
    # rate read 79% for another matmul loop): only the periods wholly inside the run count
    assert busy.summary["gpu_busy_pct"] > 90, busy.summary
    assert idle.summary["gpu_busy_pct"] < 10, idle.summary


def test_a_window_takes_the_periods_wholly_inside_it():
    # periods (0, 10] at 100%, (10, 20] at 0%, (20, 30] at 50%, (30, 40] at 80%
    samples = [(0, 0.0), (10, 100.0), (20, 0.0), (30, 50.0), (40, 80.0)]
    assert window_mean(samples, 0, 40) == pytest.approx((100 + 0 + 50 + 80) / 4)
    assert window_mean(samples, 5, 35) == pytest.approx(25.0), "the edge periods ran partly outside the run"
    assert window_mean(samples, 10, 20) == 0.0
    assert window_mean(samples, 5, 27) is None, "one whole period is under half of the window"
    assert window_mean(samples[:1], 0, 10) is None, "one sample is no period"
