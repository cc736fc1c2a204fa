"""The small API every variant calls inside its processes. Standard library only.

A worker loads the run spec the harness wrote, pins itself to its slot, times
training with a `StepClock`, and reports JSON lines to `rank<R>.jsonl` in the
run directory; the harness folds those files into one result row.
"""
from __future__ import annotations

import json
import os
import resource
import signal
import socket
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

from bench.turns import Turns

SPEC_ENV = "DTBENCH_SPEC"
NODE_RANK_ENV = "DTBENCH_NODE_RANK"
LAUNCH_TIME_ENV = "DTBENCH_LAUNCH_TIME"
# Test-only fault injection: "crash", "hang" or "kill" (SIGKILL itself), e.g. "crash:rank=1:step=3"
# (rank 0 and step 1 if unnamed).
FAULT_ENV = "DTBENCH_FAULT"


class Worker:
    """One process of a run: its identity, its slot and its report file."""

    def __init__(self, spec_path: str | os.PathLike | None = None):
        path = Path(spec_path or os.environ[SPEC_ENV])
        self.spec: dict = json.loads(path.read_text())
        self.task: dict = self.spec["task"]
        self.run_dir = Path(self.spec["run_dir"])
        env = os.environ
        # Set by the launcher (torchrun, accelerate launch, or the harness for TF workers); 0 alone.
        self.rank = int(env.get("RANK", 0))
        self.local_rank = int(env.get("LOCAL_RANK", 0))
        self.node_rank = int(env.get(NODE_RANK_ENV, env.get("GROUP_RANK", 0)))
        self._report = open(self.run_dir / f"rank{self.rank}.jsonl", "a", buffering=1)

    @property
    def device_type(self) -> str:
        return self.spec["device_type"]

    @property
    def timed_steps(self) -> int:
        """Warm-up plus every timing window: the fewest steps a run must train."""
        return self.task["warmup_steps"] + self.task["window_steps"] * self.task["windows"]

    @property
    def independent(self) -> bool:
        """Gradient synchronisation off: only the timed windows matter, replicas diverge, no evaluation."""
        return bool(self.spec.get("independent"))

    def pin(self) -> int:
        """Pin this process to its slot's cores; return how many threads it should use."""
        # On a real multi-host run the spec holds only this host's node.
        [plan] = [p for p in self.spec["node_plans"] if p["node_rank"] == self.node_rank]
        slots = plan["cpu_slots"]
        cores = slots[self.local_rank % len(slots)]
        os.sched_setaffinity(0, cores)
        return len(cores)

    def record(self, event: str, **fields) -> None:
        self._report.write(json.dumps({"event": event, "rank": self.rank, "time": time.time(), **fields}) + "\n")

    def joined(self, world_size: int, **info) -> None:
        """Report the world this process actually joined; the harness checks it against the plan."""
        self.record("joined", world_size=world_size, local_rank=self.local_rank, node_rank=self.node_rank,
                    pid=os.getpid(), host=socket.gethostname(), cores=sorted(os.sched_getaffinity(0)),
                    cuda_visible=os.environ.get("CUDA_VISIBLE_DEVICES"), **info)

    def clock(self, samples_per_step: int, sync: Callable[[], None]) -> "StepClock":
        t = self.task
        return StepClock(t["warmup_steps"], t["window_steps"], t["windows"], samples_per_step, sync,
                         on_first_step=lambda: self.record("first_step"), on_step=self._inject_fault,
                         turns=Turns.from_environment(self.rank))

    def _inject_fault(self, step: int) -> None:
        spec = os.environ.get(FAULT_ENV)
        if not spec:
            return
        kind, *args = spec.split(":")
        params = dict(arg.split("=", 1) for arg in args)
        if int(params.get("rank", 0)) != self.rank or int(params.get("step", 1)) != step:
            return
        if kind == "crash":
            raise RuntimeError(f"injected crash at step {step}")
        if kind == "hang":
            time.sleep(24 * 3600)
        if kind == "kill":
            os.kill(os.getpid(), signal.SIGKILL)

    def train(self, clock: "StepClock", epochs: int, steps_per_epoch: int, run_epoch: Callable[[int], None],
              evaluate: Callable[[], dict] | None, peak_memory_mb: Callable[[], float], params: int) -> dict:
        """The epoch loop every framework shares: train (each step calls clock.step_done()), pause
        the clock, evaluate exactly, note time-to-accuracy, record the result."""
        needed = self.timed_steps
        if epochs * steps_per_epoch < needed:
            raise ValueError(f"the task trains {epochs * steps_per_epoch} steps but warm-up and windows need "
                             f"{needed}: raise epochs or lower windows/window_steps")
        target = self.task.get("target_accuracy")
        time_to_accuracy, evaluation = None, {}
        if self.independent:
            evaluate = None  # diverged replicas: accuracy means nothing
        clock.start()
        for epoch in range(epochs):
            run_epoch(epoch)
            clock.pause()
            if self.independent and clock.done:
                break
            if evaluate is not None:
                evaluation = evaluate()
                if time_to_accuracy is None and target and evaluation["test_accuracy"] >= target:
                    time_to_accuracy = clock.train_seconds()
                self.record("epoch", epoch=epoch + 1, train_s=clock.train_seconds(), **evaluation)
            if epoch + 1 < epochs:
                clock.resume()
        result = {**clock.summary(), **evaluation, "epochs": epoch + 1 if evaluate else 0,
                  "train_s": clock.train_seconds(), "time_to_accuracy_s": time_to_accuracy,
                  "peak_memory_mb": peak_memory_mb(), "params": params}
        self.record("result", **result)
        return result

    @contextmanager
    def session(self):
        """Record any exception with its traceback before the process dies."""
        try:
            yield self
        except BaseException as exc:  # noqa: BLE001 - report everything, then re-raise
            self.record("error", error=f"{type(exc).__name__}: {exc}",
                        traceback="".join(traceback.format_exception(exc))[-4000:])
            raise
        finally:
            self._report.close()


def cpu_model() -> str:
    """The CPU's marketing name (platform.processor() is empty on Linux)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.machine()


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


class StepClock:
    """Times `windows` windows of `window_steps` steps after `warmup` steps.

    `sync` (device synchronise + barrier) is called only at window boundaries,
    at the end of the first step (for startup time) and around pauses; never
    inside a window. Time spent paused (evaluation) counts in no window and in
    no training time. With `turns` (a regression duet) the clock hands the
    machine to a partner run at each boundary, also after the last window so
    that the partner's last window is not shared with this run's evaluation.
    """

    def __init__(self, warmup: int, window_steps: int, windows: int, samples_per_step: int,
                 sync: Callable[[], None], on_first_step: Callable[[], None] = lambda: None,
                 on_step: Callable[[int], None] = lambda step: None, turns: Turns | None = None):
        if warmup < 1:
            raise ValueError("at least one warm-up step: the first step compiles and allocates")
        self.warmup, self.window_steps, self.windows = warmup, window_steps, windows
        self.samples_per_step = samples_per_step
        self._sync, self._on_first_step, self._on_step = sync, on_first_step, on_step
        self._turns = turns or Turns()
        self.steps = 0
        self.window_seconds: list[float] = []
        self._train_seconds = 0.0
        self._running_since: float | None = None
        self._window_start: float | None = None
        self._window_paused = 0.0
        self._paused_at: float | None = None

    @property
    def timing(self) -> bool:
        return self._window_start is not None

    @property
    def done(self) -> bool:
        return len(self.window_seconds) >= self.windows

    def start(self) -> None:
        self._sync()
        self._running_since = time.perf_counter()

    def step_done(self) -> None:
        self.steps += 1
        self._on_step(self.steps)
        if self.steps == 1:
            self._sync()
            self._on_first_step()
        boundary = self.steps == self.warmup or (
            self.timing and (self.steps - self.warmup) % self.window_steps == 0)
        if not boundary or self.done:
            return
        self._sync()
        now = time.perf_counter()
        timed_one = self.timing
        if timed_one:
            self.window_seconds.append(now - self._window_start - self._window_paused)
        self._window_start, self._window_paused = None, 0.0
        if self._turns.in_duet:
            # A partner run times its window now; the wait counts in no window and no training time.
            self._turns.hand_over() if timed_one else self._turns.take()
            self._sync()
            resumed = time.perf_counter()
            self._running_since += resumed - now
            now = resumed
        if not self.done:
            self._window_start = now

    def pause(self) -> None:
        self._sync()
        self._paused_at = time.perf_counter()
        self._train_seconds += self._paused_at - self._running_since

    def resume(self) -> None:
        self._sync()
        now = time.perf_counter()
        if self.timing:
            self._window_paused += now - self._paused_at
        self._running_since, self._paused_at = now, None

    def train_seconds(self) -> float:
        """Training time so far, pauses excluded."""
        if self._paused_at is not None or self._running_since is None:
            return self._train_seconds
        return self._train_seconds + time.perf_counter() - self._running_since

    def summary(self) -> dict:
        return {"window_seconds": self.window_seconds, "window_steps": self.window_steps,
                "samples_per_window": self.samples_per_step * self.window_steps,
                "steps": self.steps}


def spec_path_from_argv(argv: list[str] | None = None) -> str:
    """The spec path from `--spec PATH` (re-runnable by hand) or the environment."""
    argv = sys.argv[1:] if argv is None else argv
    if "--spec" in argv:
        return argv[argv.index("--spec") + 1]
    return os.environ[SPEC_ENV]


def exit_now(code: int = 0) -> None:
    """Leave without running C++ static destructors.

    torch 2.14's gloo aborts at interpreter exit ("terminate called without an
    active exception") in about one run in three here, after all work is done;
    the process would be counted as failed. Everything is flushed first.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
