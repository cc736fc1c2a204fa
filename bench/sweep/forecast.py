"""How long the rest of a sweep will take, from what its runs have cost so far.

Runs differ by variant and framework far more than by anything else (TensorFlow's start-up, a sharded run's
step, a synthetic-input twin's few steps), so a run still to come is priced by the closest runs this sweep has
measured: its own configuration (its run key), else the same variant, else the same framework on the same
topology, else the same framework, else any run; a synthetic-input twin only by twins. Where earlier rows (the
committed reference, a resumed folder) hold the configuration, the price is that level's cost today times how
the configuration compared with the same level there: the earlier rows give the shape (tf-ps costs twice
TensorFlow's median), today's runs the scale. Scaling the earlier rows' own costs by today's ratio instead
was worse: across CPUs and revisions the variants' costs do not scale alike.

Before any run (the dry run's estimate, and what a sweep says up front) the price is the earlier rows' own: the
closest level's median there. Once a run has finished, a configuration the earlier rows hold is priced at its
earlier cost times this machine's scale: how today's runs of its closest level compared with their own earlier
rows (one run is enough to calibrate every other)."""
from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from bench.results import ResultStore
from bench.results.jsonl import read_jsonl
from bench.results.key import config_key
from bench.run.runspec import RunSpec
from bench.spec.variants import current_framework
from bench import REPO_ROOT
from bench.status import Status


def _levels(spec: RunSpec) -> list[tuple]:
    """From the closest kind of run to the broadest."""
    variant, framework, world, twin = spec.variant.name, spec.variant.framework, spec.world_size, spec.task.synthetic
    return [spec.key, (variant, twin), (framework, world, twin), (framework, twin), (twin,), ()]


def _row_levels(row: dict) -> list[tuple]:
    """A stored row's levels, as _levels gives a spec's."""
    key = config_key(row)
    twin = key.input == "synthetic" or (row.get("task") or {}).get("dataset") == "synthetic"
    framework = current_framework(row["framework"])
    return [key, (key.variant, twin), (framework, key.world_size, twin), (framework, twin), (twin,), ()]


class Forecast:
    def __init__(self, earlier_rows: list[dict] = ()) -> None:
        self._earlier: dict[tuple, list[float]] = defaultdict(list)
        self._measured: dict[tuple, list[tuple]] = defaultdict(list)  # level -> (run key, seconds) measured today
        for row in earlier_rows:
            if row.get("status") == Status.OK and row.get("wall_s"):
                for level in _row_levels(row):
                    self._earlier[level].append(float(row["wall_s"]))

    def add(self, spec: RunSpec, seconds: float) -> None:
        """A finished run's cost (a skipped one costs nothing and teaches nothing)."""
        for level in _levels(spec):
            self._measured[level].append((spec.key, seconds))

    def cost(self, spec: RunSpec) -> float | None:
        """Its own configuration's median cost today; else its earlier cost at this machine's scale (how today's
        runs of its closest level compared with their own earlier rows); else the closest level's median today
        (None before any run has finished)."""
        if spec.inapplicable():
            return 0.0
        levels = _levels(spec)
        if self._measured.get(levels[0]):
            return self._today(levels[0])
        for level in levels[1:]:
            if self._measured.get(level):
                scale = self.scale(level)
                if scale is not None and self._earlier.get(levels[0]):
                    return statistics.median(self._earlier[levels[0]]) * scale
                return self._today(level)
        return None

    def _today(self, level: tuple) -> float:
        return statistics.median(seconds for _, seconds in self._measured[level])

    def scale(self, level: tuple = ()) -> float | None:
        """How much longer this machine takes than the earlier rows' did: the median, over the runs measured
        today at `level` whose own configuration the earlier rows hold, of today's cost over the earlier one."""
        ratios = [seconds / statistics.median(self._earlier[key]) for key, seconds in self._measured.get(level, [])
                  if self._earlier.get(key)]
        return statistics.median(ratios) if ratios else None

    def estimate(self, spec: RunSpec) -> tuple[float | None, bool]:
        """Before any run: (the earlier rows' median cost at the closest level, whether that level is the run's own
        configuration); (None, False) where no earlier row is of its kind."""
        if spec.inapplicable():
            return 0.0, True
        levels = _levels(spec)
        for level in levels:
            if self._earlier.get(level):
                return statistics.median(self._earlier[level]), level == levels[0]
        return None, False

    def remaining(self, specs: list[RunSpec]) -> float | None:
        costs = [self.cost(spec) for spec in specs]
        return None if any(c is None for c in costs) else sum(costs)


def earlier_rows(specs: list[RunSpec], store: ResultStore) -> list[dict]:
    """The rows a sweep's clock learns its shape from: the committed reference of each device type the sweep runs
    on, and what the folder already holds (a resumed sweep), those of the sweep's own tasks only (a task's costs
    say nothing of another's)."""
    tasks = {(s.task.name, s.task.recipe.global_batch) for s in specs}
    references = [REPO_ROOT / "results" / f"reference-{t}" / "results.jsonl" for t in {s.device_type for s in specs}]
    rows = [row for path in references for row in read_jsonl(path)] + store.dicts()
    return [row for row in rows if ((row.get("task") or {}).get("name"), (row.get("task") or {}).get("global_batch"))
            in tasks]


def up_front(specs: list[RunSpec], audit: list[RunSpec], out_dir: Path) -> str:
    """What a sweep says before it starts: how long its runs (and the fast-path audit's, when this machine has
    not measured them yet) took in the earlier rows; its first run then recalibrates that for this machine."""
    forecast = Forecast(earlier_rows(specs + audit, ResultStore(out_dir)))
    priced = [forecast.estimate(spec)[0] for spec in specs + audit]
    audit_part = f" and the fast-path audit's {_runs(len(audit))}" if audit else ""
    known = [seconds for seconds in priced if seconds is not None]
    if not known:
        return (f"Estimate: {_runs(len(specs))}{audit_part}; no earlier row of this task to price them from, so the "
                "first run's line gives the first ETA.")
    missing = len(priced) - len(known)
    references = sorted({f"results/reference-{spec.device_type}" for spec in specs})
    return (f"Estimate: {_runs(len(specs))}{audit_part}, about {sum(known) / 60:.0f} min by what the same runs took "
            f"before ({', '.join(references)}, and {out_dir} where it holds rows)"
            + (f", {missing} runs unpriced" if missing else "")
            + "; recalibrated for this machine after its first run.")


def _runs(count: int) -> str:
    return f"{count} run{'s' if count != 1 else ''}"


# The GPU default (ResNet-50, 224 px, bf16) has no committed sweep yet: before one, a GPU sweep of it is projected
# from the one-GPU step measured on an H100 at the same per-device batch, priced per run as that folder's time
# outside training (start-up, first step, teardown) plus the steps the run trains at that step, plus its exact
# evaluation at a third of a training step's cost a sample (a forward pass is about a third of one's FLOPs).
GPU_STEP_REFERENCE = "reference-h100-resnet50"
TEST_SAMPLES = {"fashion-mnist": 10_000}
TRAIN_SAMPLES = {"fashion-mnist": 60_000}


def gpu_projection(specs: list[RunSpec]) -> str | None:
    """The projected time of a GPU sweep of ResNet-50 from the one-GPU H100 step (None for any other sweep)."""
    rows = [r for r in read_jsonl(REPO_ROOT / "results" / GPU_STEP_REFERENCE / "results.jsonl")
            if r.get("status") == Status.OK]
    gpu_specs = [s for s in specs if s.device_type == "cuda" and s.task.model.name == "resnet50"
                 and s.task.recipe.precision == "bf16" and s.task.model.image_size == 224]
    if not rows or not gpu_specs or len(gpu_specs) != len(specs):
        return None
    batch = (rows[0]["task"] or {}).get("global_batch")
    step_s = statistics.median(batch / r["throughput"]["median"] for r in rows)
    outside = {v: statistics.median(r["wall_s"] - r["train_s"] for r in rows if r["variant"] == v)
               for v in {r["variant"] for r in rows}}
    slowest = max(outside.values())
    total = 0.0
    for spec in gpu_specs:
        task, per_device = spec.task, spec.task.recipe.global_batch // spec.world_size
        steps = task.recipe.epochs * task.steps_per_epoch(TRAIN_SAMPLES.get(task.data.dataset, 0))
        if task.synthetic:
            steps = task.timing.warmup_steps + task.timing.window_steps * task.timing.windows
        scale = per_device / batch  # a step's time grows with the images each GPU trains
        evaluation = 0 if task.synthetic else task.recipe.epochs * TEST_SAMPLES.get(task.data.dataset, 0) / spec.world_size
        total += outside.get(spec.variant.name, slowest) + steps * step_s * scale + evaluation * step_s / batch / 3
    unmeasured = sorted({s.variant.name for s in gpu_specs} - set(outside))
    most = max(s.world_size for s in gpu_specs)
    return (f"Estimate (projected): about {total / 60:.0f} min for {_runs(len(gpu_specs))} on a box of {most} H100s, "
            f"from the one-GPU step measured on an H100 (results/{GPU_STEP_REFERENCE}: "
            f"{1000 * step_s:.0f} ms at {batch} images, {min(outside.values()):.0f}-{slowest:.0f} s a run outside "
            f"training); {', '.join(unmeasured) or 'no variant'} priced at the slowest of those, and no multi-GPU "
            "run of it measured yet: the projection's error is unknown")
