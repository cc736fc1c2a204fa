"""What a run did over time. A thread of the node agent samples, every `interval_s`, each local rank's resident
memory and CPU use (its process with the processes it started, such as DataLoader workers: they inherit its
RANK), how busy each core of the machine was, and on GPUs each of the node's devices: utilisation, memory
used, power and SM clock (NVML). The samples go to the run folder as one columnar file; the row keeps their
summary (`summary`); the run's plot is drawn from the file (bench.run.sampler_plot).

A rank is a process whose environment names its RANK; where one process drives a node (`roots_are_ranks`:
DataParallel, MirroredStrategy, the single-device loops) each launched process is a rank, by launch order.
The launchers themselves (torchrun's agent, `accelerate launch`) are not sampled.

The thread runs at the idle scheduling class (nice 19 where that is refused), so it takes a core only when no
rank wants it, and walks /proc for new processes every TREE_EVERY_S rather than every tick: what it costs the
run is measured in docs/methodology.md.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
from pathlib import Path

import psutil

log = logging.getLogger(__name__)
FILE = "timeseries.parquet"
COLUMNS = ("t_s", "kind", "index", "rss_mb", "cpu_pct", "busy_pct", "util_pct", "mem_mb", "power_w", "sm_clock_mhz")
MB = 1024 * 1024
DEFAULT_INTERVAL_S = 0.5  # `bench run` and `bench sweep` (--sample-every)
TREE_EVERY_S = 2.0  # a rank's new processes (DataLoader workers each epoch) are found this often


class Sampler:
    """Samples a run's processes (and GPUs) on a thread from `start()` to `stop()`; `save()` writes the file."""

    def __init__(self, roots: list[int], roots_are_ranks: bool, run_dir: Path, interval_s: float,
                 gpus: list[str] | None = None):
        self.roots, self.roots_are_ranks, self.run_dir, self.interval_s = roots, roots_are_ranks, run_dir, interval_s
        self.rows: list[tuple] = []
        self.cores: dict[int, list[int]] = {}   # rank -> the cores it may run on (its slot)
        self._ranks: dict[int, int] = {}  # pid -> RANK from its environment
        self._joined: dict[int, int] = {}  # pid -> rank, as the ranks reported when they joined
        self._processes: dict[int, psutil.Process] = {}
        self._trees: dict[int, list[psutil.Process]] = {}  # root pid -> it and its descendants, last walk
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="dtbench-sampler", daemon=True)
        self._gpus = _Gpus.open(gpus) if gpus else None
        self.thread_cpu_s = 0.0
        self.started: float | None = None
        self.sampled_s = 0.0
        self.ticks = 0

    def start(self) -> Sampler:
        self.started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop sampling (before the run's processes are killed: the samples end with the run)."""
        self._stop.set()
        self._thread.join()
        self.sampled_s = time.monotonic() - self.started
        if self._gpus:
            self._gpus.close()

    def save(self, reported_slots: dict[int, list[int]] | None = None) -> dict | None:
        """Write the samples and draw the run's figure; the row's summary (None when nothing was sampled).
        `reported_slots`: the cores each rank said it was pinned to once it joined; they replace what the
        sampler saw from outside (a process read before its exec, or its pid's earlier owner, can mislead
        it), which stays for a rank that never got that far."""
        if not self.rows:
            return None
        self.cores.update(reported_slots or {})
        import pandas as pd

        from bench.run import sampler_plot  # matplotlib: imported only once there is something to draw

        frame = pd.DataFrame(self.rows, columns=COLUMNS)
        frame.to_parquet(self.run_dir / FILE, index=False)
        sampler_plot.draw(frame, self.run_dir, self.run_dir.name, self.cores)
        return summary(frame, self.cores, self.interval_s, self.ticks, self.thread_cpu_s / max(1e-9, self.sampled_s))

    def _run(self) -> None:
        _yield_to_the_run()
        last_cores = psutil.cpu_times(percpu=True)
        while not self._stop.wait(self.interval_s):
            began = time.thread_time()
            now = time.monotonic() - self.started
            cores = psutil.cpu_times(percpu=True)
            for index, (before, after) in enumerate(zip(last_cores, cores)):
                self.rows.append((now, "core", index, None, None, _busy_pct(before, after), None, None, None, None))
            last_cores = cores
            for rank, (rss, cpu) in self._ranks_now().items():
                self.rows.append((now, "rank", rank, rss / MB, cpu, None, None, None, None, None))
            if self._gpus:
                for index, figures in self._gpus.read().items():
                    self.rows.append((now, "gpu", index, None, None, None, *figures))
            self.ticks += 1
            self.thread_cpu_s += time.thread_time() - began

    def _ranks_now(self) -> dict[int, tuple[int, float]]:
        """rank -> (resident bytes, CPU % of one core since the last sample) summed over its processes."""
        out: dict[int, list] = {}
        walk = self.ticks % max(1, round(TREE_EVERY_S / self.interval_s)) == 0
        for position, root in enumerate(self.roots):
            for process in self._tree(root, walk):
                rank = position if self.roots_are_ranks else self._rank(process)
                if rank is None:
                    continue
                with contextlib.suppress(psutil.Error):
                    with process.oneshot():
                        if process.status() == psutil.STATUS_ZOMBIE:  # exited, not yet reaped: no memory left
                            continue
                        rss, cpu = process.memory_info().rss, process.cpu_percent()
                        if self._rank_of_pid(process.ppid()) != rank:  # the rank's own process, not a loader
                            self._note_slot(rank, sorted(process.cpu_affinity()))
                    figures = out.setdefault(rank, [0, 0.0])
                    figures[0] += rss
                    figures[1] += cpu
        return {rank: (rss, cpu) for rank, (rss, cpu) in out.items()}

    def _note_slot(self, rank: int, cores: list[int]) -> None:
        """A rank's slot: the narrowest affinity it had (it pins itself after start-up, and may unpin to exit)."""
        if rank not in self.cores or len(cores) < len(self.cores[rank]):
            self.cores[rank] = cores

    def _rank_of_pid(self, pid: int) -> int | None:
        try:
            return self._rank(self._process(pid))
        except psutil.Error:
            return None

    def _tree(self, root: int, walk: bool) -> list[psutil.Process]:
        """The root and its descendants: found anew when `walk` (children() reads every process's stat),
        else those found last time."""
        if walk or root not in self._trees:
            try:
                found = [self._process(root)] + self._process(root).children(recursive=True)
            except psutil.Error:
                found = []
            # One Process object per pid: cpu_percent() measures from that object's previous call.
            self._trees[root] = [self._processes.setdefault(p.pid, p) for p in found]
        return self._trees[root]

    def _process(self, pid: int) -> psutil.Process:
        if pid not in self._processes:
            self._processes[pid] = psutil.Process(pid)
        return self._processes[pid]

    def _rank(self, process: psutil.Process) -> int | None:
        if process.pid not in self._ranks:
            try:
                rank = process.environ().get("RANK")
            except psutil.Error:
                rank = None
            if rank is None or not rank.isdigit():
                # An engine's rank (a Dask worker, a Ray actor) is told its RANK after it started (bench.engines.api):
                # it is known by the pid it reported when it joined.
                rank = self._joined_pids().get(process.pid)
            if rank is None:
                return None  # read again next time: a launcher's child shows the launcher's environment until its exec
            self._ranks[process.pid] = int(rank)
        return self._ranks[process.pid]

    def _joined_pids(self) -> dict[int, int]:
        """pid -> rank, from the `joined` line each rank's report begins with (read once a rank has written it)."""
        found = self._joined
        known = set(found.values())
        for path in self.run_dir.glob("rank*.jsonl"):
            rank = path.stem[4:]
            if not rank.isdigit() or int(rank) in known:
                continue
            with contextlib.suppress(OSError, ValueError), open(path) as report:
                for line in report:
                    if line.startswith('{"event": "joined"'):
                        found[int(json.loads(line)["pid"])] = int(rank)
                        break
        return found


def _yield_to_the_run() -> None:
    """This thread only: run when a core has nothing else to do (SCHED_IDLE), else at the lowest priority, so
    that a tick never delays a rank (and, through the next all-reduce, every rank)."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # 0: the calling thread, on Linux
    except (AttributeError, OSError):
        with contextlib.suppress(AttributeError, OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)


def _busy_pct(before, after) -> float:
    idle = lambda t: t.idle + getattr(t, "iowait", 0.0)  # noqa: E731
    total = sum(after) - sum(before)
    return 100.0 * (1 - (idle(after) - idle(before)) / total) if total > 0 else 0.0


class _Gpus:
    """The node's GPUs through NVML (nvidia-ml-py); `visible` are CUDA_VISIBLE_DEVICES' indices."""

    def __init__(self, nvml, visible: list[str]):
        self.nvml = nvml
        self.handles = {int(i): nvml.nvmlDeviceGetHandleByIndex(int(i)) for i in visible}

    @classmethod
    def open(cls, visible: list[str]) -> _Gpus | None:
        """None where NVML cannot be loaded (no driver library): the run goes on without GPU samples."""
        try:
            import pynvml

            pynvml.nvmlInit()
            return cls(pynvml, visible)
        except Exception as exc:  # ImportError, pynvml.NVMLError_LibraryNotFound, ...
            log.warning("no GPU samples for this run: NVML unavailable (%s)", exc)
            return None

    def read(self) -> dict[int, tuple[float, float, float, float]]:
        """index -> (utilisation %, memory used MiB, power W, SM clock MHz)."""
        nvml, out = self.nvml, {}
        for index, handle in self.handles.items():
            with contextlib.suppress(nvml.NVMLError):
                out[index] = (float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu),
                              nvml.nvmlDeviceGetMemoryInfo(handle).used / MB,
                              nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                              float(nvml.nvmlDeviceGetClockInfo(handle, nvml.NVML_CLOCK_SM)))
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.nvml.nvmlShutdown()


def energy_per_sample(path: Path, since_s: float, samples_per_s: float) -> float | None:
    """Joules per training sample: the node's GPUs' summed mean power from `since_s` (the first step's end,
    seconds after launch) to the end, over the run's throughput (steady state: startup and its idle power
    left out; evaluation, which draws less, counted in)."""
    import pandas as pd

    gpus = pd.read_parquet(path).query("kind == 'gpu' and t_s >= @since_s")
    if gpus.empty or not samples_per_s:
        return None
    return float(gpus.groupby("index")["power_w"].mean().sum()) / samples_per_s


def summary(frame, cores: dict[int, list[int]], interval_s: float, ticks: int, sampler_cpu: float) -> dict:
    """The row's `timeseries`: per rank (by rank order) its peak RSS, mean CPU use and its slot's mean busy;
    per GPU its mean utilisation, peak memory and mean power; the energy the GPUs drew over the sampled
    time (joules); and the sampler's own CPU use (a fraction of one core)."""
    ranks = frame[frame["kind"] == "rank"].groupby("index")
    core_busy = frame[frame["kind"] == "core"].groupby("index")["busy_pct"].mean()
    out = {"file": FILE, "interval_s": interval_s, "samples": ticks, "sampler_cpu_fraction": round(sampler_cpu, 5),
           "ranks": [int(r) for r in ranks.groups], "cores": [cores.get(int(r), []) for r in ranks.groups],
           "peak_rss_mb": [round(float(v), 1) for v in ranks["rss_mb"].max()],
           "mean_cpu_pct": [round(float(v), 1) for v in ranks["cpu_pct"].mean()],
           "mean_slot_busy_pct": [round(float(core_busy.reindex(cores.get(int(r), [])).mean()), 1)
                                  for r in ranks.groups]}
    gpus = frame[frame["kind"] == "gpu"].groupby("index")
    if len(gpus):
        out.update({"gpus": [int(g) for g in gpus.groups],
                    "gpu_mean_util_pct": [round(float(v), 1) for v in gpus["util_pct"].mean()],
                    "gpu_peak_mem_mb": [round(float(v), 1) for v in gpus["mem_mb"].max()],
                    "gpu_mean_power_w": [round(float(v), 1) for v in gpus["power_w"].mean()],
                    "gpu_energy_j": round(sum(_joules(g, interval_s) for _, g in gpus), 1)})
    return out


def _joules(gpu, interval_s: float) -> float:
    """One GPU's energy: each sample's power over the time since the one before (the first: one interval), so
    that a tick the machine delayed counts for the time it stood for."""
    held = gpu["t_s"].diff().fillna(interval_s)
    return float((gpu["power_w"] * held).sum())
