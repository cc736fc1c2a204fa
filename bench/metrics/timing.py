"""Where a run's time goes at the scale of a step and a start: the median step (and its p90), start-up to the
first step's end, the first step itself (compilation) and the windows' share spent waiting for input."""
from __future__ import annotations

from bench.metrics import Column, Metric

METRIC = Metric("timing", columns=(
    Column("step ms", "step_ms", ".1f", False),
    Column("startup s", "startup_s", ".1f", False),
), repeats=tuple((c, "median") for c in ("step_ms", "step_p90_ms", "startup_s", "train_s", "input_wait_fraction",
                                          "compile_s", "first_step_s")))
