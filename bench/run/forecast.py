"""How long the rest of a sweep will take, from what its runs have cost so far. Runs differ by framework far
more than by anything else (TensorFlow's start-up, a sharded run's step), so each planned run is priced by the
closest runs already measured: the same variant on the same topology, else the same variant, else the same
framework, else every run."""
from __future__ import annotations

import statistics
from collections import defaultdict

from bench.run.runspec import RunSpec


def _levels(spec: RunSpec) -> list[tuple]:
    """From the closest kind of run to the broadest."""
    variant, framework = spec.variant.name, spec.variant.framework
    return [(variant, spec.world_size, spec.independent, spec.task.synthetic), (variant,), (framework,), ()]


class Forecast:
    def __init__(self) -> None:
        self._seconds: dict[tuple, list[float]] = defaultdict(list)

    def add(self, spec: RunSpec, seconds: float) -> None:
        """A finished run's cost (a skipped one costs nothing and teaches nothing)."""
        for level in _levels(spec):
            self._seconds[level].append(seconds)

    def cost(self, spec: RunSpec) -> float | None:
        """The median cost of the closest measured runs (None before any run has finished)."""
        if spec.inapplicable():
            return 0.0
        for level in _levels(spec):
            if self._seconds.get(level):
                return statistics.median(self._seconds[level])
        return None

    def remaining(self, specs: list[RunSpec]) -> float | None:
        costs = [self.cost(spec) for spec in specs]
        return None if any(c is None for c in costs) else sum(costs)
