"""The plain loops' clock: warm-up, then windows of `window_steps` steps bounded by the caller's device sync,
as the harness's StepClock times them (none of its pauses, turns or profiling). Standard library and the task's dataclass only."""
from __future__ import annotations

import json
import time
from typing import Callable

from bench.spec.task import TaskSpec


class Windows:
    def __init__(self, task: TaskSpec, sync: Callable[[], object]):
        self.warmup, self.window_steps, self.sync = task.timing.warmup_steps, task.timing.window_steps, sync
        self.steps = self.warmup + self.window_steps * task.timing.windows  # what the loop trains
        self.samples_per_window = task.recipe.global_batch * self.window_steps
        self.seconds: list[float] = []
        self._done, self._start = -self.warmup, None

    def step_done(self) -> None:
        self._done += 1
        if self._done == 0 or (self._done > 0 and self._done % self.window_steps == 0):
            self.sync()
            now = time.perf_counter()
            if self._start is not None:
                self.seconds.append(now - self._start)
            self._start = now

    def report(self) -> None:
        """The one JSON line bench.studies.overhead reads."""
        print(json.dumps({"window_seconds": self.seconds, "samples_per_window": self.samples_per_window}))
