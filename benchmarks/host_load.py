"""What the machine did while a benchmark ran: is a decode step waiting on the GPU or on the CPU?

    from vllm.third_party import pynvml  # the NVML binding vLLM ships

    with HostLoad(pids=[server.process.pid], nvml=pynvml) as load:
        ...                      # the timed run
    load.summary  # {"gpu_busy_pct", "sm_clock_mhz", "cpu_busy_pct", "cpu_steal_pct", "server_cpu_pct", ...}

- gpu_busy_pct: the share of the run in which a kernel ran, from the driver's own utilization samples
  (`nvmlDeviceGetSamples`: each gives the busy share of the period ending at its timestamp, 0.2 s on
  the H200), over the periods wholly inside the run (`window_mean`). Polling the current rate instead
  lags by a period: on the H200 a 1.5 s loop of back-to-back matmuls read 79%. Under 100 with requests
  always in flight, the GPU waited for the host: a faster kernel cannot shorten such a step.
- sm_clock_mhz: the median SM clock, polled every `interval_s` (a throttled or idling GPU shows here).
- cpu_busy_pct, cpu_steal_pct: the whole machine's CPU time over the run, and the share a virtual
  machine's host took away (steal), from psutil's counters.
- server_cpu_pct: the busiest process of the server's process tree (vLLM's engine core, in practice),
  in percent of one core; near 100 it is the step's bottleneck.

The caller hands in the NVML binding (vLLM ships one, `vllm.third_party.pynvml`: this module imports
nothing of vLLM), and psutil comes with vLLM: this runs beside an engine. Without a binding or a GPU driver
the GPU fields are None and `gpu_note` says why, so the same code runs on a CPU machine.
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence


class HostLoad:
    def __init__(self, pids: Sequence[int] = (), nvml=None, gpu_index: int = 0, interval_s: float = 0.1):
        self.pids, self.nvml, self.gpu_index, self.interval_s = list(pids), nvml, gpu_index, interval_s
        self.summary: dict = {}
        self._clocks: list[int] = []  # SM clock, MHz, polled
        self._util: dict[int, float] = {}  # the driver's samples: timestamp (us) -> busy %
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._gpu_note: str | None = None

    def __enter__(self) -> HostLoad:
        import psutil

        self._handle = self._gpu_handle()  # first: NVML's start is not the run's
        self._procs = _process_tree(self.pids)
        self._proc_t0 = {p.pid: _cpu_s(p) for p in self._procs}
        self._cpu_t0 = psutil.cpu_times()
        self._t0, self._t0_us = time.monotonic(), time.time() * 1e6
        if self._handle is not None:
            self._thread = threading.Thread(target=self._poll, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        import psutil

        wall, t1_us = time.monotonic() - self._t0, time.time() * 1e6
        cpu = psutil.cpu_times()
        busiest = max((_cpu_s(p) - self._proc_t0[p.pid] for p in self._procs), default=None)
        self._stop.set()
        busy = None
        if self._thread is not None:
            self._thread.join()
            # the driver posts a period's sample at its end: wait for the one that covers the run's end
            deadline = time.monotonic() + 1.0
            while self._gpu_note is None and max(self._util, default=0) < t1_us and time.monotonic() < deadline:
                time.sleep(0.05)
                self._fetch_util()
            busy = window_mean(sorted(self._util.items()), self._t0_us, t1_us)
            self.nvml.nvmlShutdown()
        total = sum(cpu) - sum(self._cpu_t0)
        idle = (cpu.idle + getattr(cpu, "iowait", 0.0)) - (self._cpu_t0.idle + getattr(self._cpu_t0, "iowait", 0.0))
        steal = getattr(cpu, "steal", 0.0) - getattr(self._cpu_t0, "steal", 0.0)
        note = self._gpu_note or (None if busy is not None else "NVML's samples did not cover the run")
        self.summary = {
            "wall_s": round(wall, 3),
            "gpu_busy_pct": None if busy is None else round(busy, 1),
            "sm_clock_mhz": statistics.median(self._clocks) if self._clocks else None,
            "gpu_samples": len(self._util),
            "gpu_note": note,
            "cpu_busy_pct": round(100 * (total - idle) / total, 1) if total > 0 else None,
            "cpu_steal_pct": round(100 * steal / total, 1) if total > 0 else None,
            "server_cpu_pct": round(100 * busiest / wall, 1) if busiest is not None and wall > 0 else None,
        }

    def _gpu_handle(self):
        if self.nvml is None:
            self._gpu_note = "no GPU figures: no NVML binding given"
            return None
        try:
            self.nvml.nvmlInit()
        except self.nvml.NVMLError as exc:  # no driver: the CPU figures still stand
            self._gpu_note = f"no GPU figures: {type(exc).__name__}: {exc}"
            return None
        try:
            return self.nvml.nvmlDeviceGetHandleByIndex(self.gpu_index)
        except self.nvml.NVMLError as exc:  # no such GPU
            self.nvml.nvmlShutdown()
            self._gpu_note = f"no GPU figures: {type(exc).__name__}: {exc}"
            return None

    def _poll(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self._clocks.append(self.nvml.nvmlDeviceGetClockInfo(self._handle, self.nvml.NVML_CLOCK_SM))
            except self.nvml.NVMLError as exc:  # a driver that does not report it: say so, keep the run
                self._gpu_note = f"no GPU figures: {type(exc).__name__}: {exc}"
                return
            self._fetch_util()

    def _fetch_util(self) -> None:
        """The driver's utilization samples since the last one kept (from 2 s before the run at first: the
        last sample before the run marks where the first period inside it begins); the driver keeps a
        short buffer, so this runs while the run does."""
        nvml = self.nvml
        since = int(max(self._util, default=self._t0_us - 2e6))
        try:
            kind, samples = nvml.nvmlDeviceGetSamples(self._handle, nvml.NVML_GPU_UTILIZATION_SAMPLES, since)
        except nvml.NVMLError_NotFound:  # nothing new yet
            return
        except nvml.NVMLError as exc:
            self._gpu_note = f"no GPU busy share: {type(exc).__name__}: {exc}"
            return
        field = _VALUE_FIELDS.get(kind, "uiVal")
        for sample in samples:
            if sample.timeStamp > since:
                self._util[sample.timeStamp] = float(getattr(sample.sampleValue, field))


# nvmlValueType_t -> the field of nvmlValue_t that holds it
_VALUE_FIELDS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal"}


def window_mean(samples: list[tuple[float, float]], t0: float, t1: float) -> float | None:
    """The mean over [t0, t1] of a quantity given as (end time, value over the period since the sample
    before), from the periods that lie wholly inside the window, each weighted by its length: a period
    that straddles an edge averages in what ran outside (on the H200, with 0.2 s periods, a 1.5 s loop
    of back-to-back matmuls read 82.6% with its edge periods counted). None unless those periods cover
    half the window (a run of a few periods, or samples missing)."""
    covered = weighted = 0.0
    for (start, _), (end, value) in zip(samples, samples[1:]):
        if t0 <= start and end <= t1:
            covered += end - start
            weighted += (end - start) * value
    return weighted / covered if t1 > t0 and covered >= 0.5 * (t1 - t0) else None


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
