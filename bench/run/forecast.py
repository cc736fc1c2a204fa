"""How long the rest of a sweep will take, from what its runs have cost so far.

Runs differ by variant far more than by anything else (TensorFlow's start-up, a sharded run's step, a
synthetic-input twin's few steps), and a sweep meets most variants for the first time late. So a run still to
come is priced, in this order, by:
1. the runs of its kind this sweep has measured (the same variant, topology, synchronisation and input);
2. what its kind cost in earlier rows (the committed reference of this device type, or the folder a resumed
   sweep continues), scaled by how this sweep's runs of the same framework compare with their earlier rows
   (this machine today against the machine of those rows);
3. the closest runs this sweep has measured: the same variant, else the same framework on the same topology,
   else the same framework, else any run (a twin only by twins)."""
from __future__ import annotations

import statistics
from collections import defaultdict

from bench.run.runspec import RunSpec


def _levels(spec: RunSpec) -> list[tuple]:
    """From the closest kind of run to the broadest; the first is the run's own kind."""
    variant, framework, world, twin = spec.variant.name, spec.variant.framework, spec.world_size, spec.task.synthetic
    return [(spec.task.name, variant, world, spec.independent, twin), (variant, twin), (framework, world, twin),
            (framework, twin), (twin,), ()]


def _row_kind(row: dict) -> tuple:
    task = row.get("task") or {}
    return (task.get("name"), row["variant"], int(row["nodes"]) * int(row["devices_per_node"]),
            bool(row.get("independent")), task.get("input") == "synthetic" or task.get("dataset") == "synthetic")


class Forecast:
    def __init__(self, earlier_rows: list[dict] = ()) -> None:
        self._seconds: dict[tuple, list[float]] = defaultdict(list)
        self._earlier: dict[tuple, list[float]] = defaultdict(list)
        for row in earlier_rows:
            if row.get("status") == "ok" and row.get("wall_s"):
                self._earlier[_row_kind(row)].append(float(row["wall_s"]))
        self._scale: dict[str, list[float]] = defaultdict(list)  # framework -> this sweep's run / its earlier kind

    def add(self, spec: RunSpec, seconds: float) -> None:
        """A finished run's cost (a skipped one costs nothing and teaches nothing)."""
        for level in _levels(spec):
            self._seconds[level].append(seconds)
        before = self._earlier_cost(spec)
        if before:
            self._scale[spec.variant.framework].append(seconds / before)

    def _earlier_cost(self, spec: RunSpec) -> float | None:
        found = self._earlier.get(_levels(spec)[0])
        return statistics.median(found) if found else None

    def cost(self, spec: RunSpec) -> float | None:
        """What the run will cost (None before anything could say)."""
        if spec.inapplicable():
            return 0.0
        own = self._seconds.get(_levels(spec)[0])
        if own:
            return statistics.median(own)
        before = self._earlier_cost(spec)
        ratios = self._scale.get(spec.variant.framework) or [r for rs in self._scale.values() for r in rs] or [1.0]
        if before:
            return before * statistics.median(ratios)
        for level in _levels(spec)[1:]:
            if self._seconds.get(level):
                return statistics.median(self._seconds[level])
        return None

    def remaining(self, specs: list[RunSpec]) -> float | None:
        costs = [self.cost(spec) for spec in specs]
        return None if any(c is None for c in costs) else sum(costs)
