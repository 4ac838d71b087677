"""What the machine did while a benchmark ran: is a decode step waiting on the GPU or on the CPU?

    with HostLoad(pids=[server.process.pid]) as load:
        ...                      # the timed run
    load.summary  # {"gpu_busy_pct", "sm_clock_mhz", "cpu_busy_pct", "cpu_steal_pct", "server_cpu_pct", ...}

- gpu_busy_pct: the mean of NVML's utilization over the run (the share of each sample period in which
  a kernel ran), polled every `interval_s`. Under 100 with requests always in flight, the GPU waited
  for the host: a faster kernel cannot shorten such a step.
- sm_clock_mhz: the median SM clock over the same samples (a throttled or idling GPU shows here).
- cpu_busy_pct, cpu_steal_pct: the whole machine's CPU time over the run, and the share a virtual
  machine's host took away (steal), from psutil's counters.
- server_cpu_pct: the busiest process of the server's process tree (vLLM's engine core, in practice),
  in percent of one core; near 100 it is the step's bottleneck.

NVML is the binding vLLM ships (`vllm.third_party.pynvml`), and psutil comes with vLLM: this runs beside
an engine. Without a GPU driver the GPU fields are None and `gpu_note` says why, so the same code runs
on a CPU machine.
"""

from __future__ import annotations

import statistics
import threading
import time


def _nvml():
    from vllm.third_party import pynvml

    return pynvml


class HostLoad:
    def __init__(self, pids: list[int] = (), gpu_index: int = 0, interval_s: float = 0.1):
        self.pids, self.gpu_index, self.interval_s = list(pids), gpu_index, interval_s
        self.summary: dict = {}
        self._samples: list[tuple[int, int]] = []  # (utilization %, SM clock MHz)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu_note: str | None = None

    def __enter__(self) -> HostLoad:
        import psutil

        handle = self._gpu_handle()  # first: importing the binding takes seconds the first time
        self._procs = _process_tree(self.pids)
        self._proc_t0 = {p.pid: _cpu_s(p) for p in self._procs}
        self._cpu_t0 = psutil.cpu_times()
        self._t0 = time.monotonic()
        if handle is not None:
            self._thread = threading.Thread(target=self._poll, args=(handle,), daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import psutil

        wall = time.monotonic() - self._t0
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            _nvml().nvmlShutdown()
        cpu = psutil.cpu_times()
        total = sum(cpu) - sum(self._cpu_t0)
        idle = (cpu.idle + getattr(cpu, "iowait", 0.0)) - (self._cpu_t0.idle + getattr(self._cpu_t0, "iowait", 0.0))
        steal = getattr(cpu, "steal", 0.0) - getattr(self._cpu_t0, "steal", 0.0)
        busiest = max((_cpu_s(p) - self._proc_t0[p.pid] for p in self._procs), default=None)
        self.summary = {
            "wall_s": round(wall, 3),
            "gpu_busy_pct": round(statistics.fmean(u for u, _ in self._samples), 1) if self._samples else None,
            "sm_clock_mhz": statistics.median(c for _, c in self._samples) if self._samples else None,
            "gpu_samples": len(self._samples),
            "gpu_note": self._gpu_note or (None if self._samples else "no NVML sample in the run"),
            "cpu_busy_pct": round(100 * (total - idle) / total, 1) if total > 0 else None,
            "cpu_steal_pct": round(100 * steal / total, 1) if total > 0 else None,
            "server_cpu_pct": round(100 * busiest / wall, 1) if busiest is not None and wall > 0 else None,
        }

    def _gpu_handle(self):
        try:
            nvml = _nvml()
            nvml.nvmlInit()
            return nvml.nvmlDeviceGetHandleByIndex(self.gpu_index)
        except Exception as exc:  # no driver, no library, no such GPU: the CPU figures still stand
            self._gpu_note = f"no GPU figures: {type(exc).__name__}: {exc}"
            return None

    def _poll(self, handle) -> None:
        nvml = _nvml()
        while not self._stop.wait(self.interval_s):
            try:
                util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
                clock = nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)
            except nvml.NVMLError as exc:  # a driver that does not report these: say so, keep the run
                self._gpu_note = f"no GPU figures: {type(exc).__name__}: {exc}"
                return
            self._samples.append((util, clock))


def _process_tree(pids: list[int]) -> list:
    import psutil

    procs = []
    for pid in pids:
        try:
            root = psutil.Process(pid)
            procs += [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            continue
    return procs


def _cpu_s(proc) -> float:
    """User and system CPU seconds of a process so far (its threads together); 0 once it is gone."""
    import psutil

    try:
        t = proc.cpu_times()
        return t.user + t.system
    except psutil.NoSuchProcess:
        return 0.0
