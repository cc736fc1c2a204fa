"""Where a run's time goes at the scale of a step and a start: the median step (and its p90), start-up to the
first step's end, the first step itself (compilation: a compiled run's compile time) and the windows' share spent
waiting for input."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.metrics import Column, Context, Metric

if TYPE_CHECKING:
    import pandas as pd


def derive(folded: pd.DataFrame, context: Context) -> None:
    """A compiled run's compile time: its first step, which no window times."""
    folded["compile_s"] = [r["first_step_s"] if r.get("task.compile") is True else None
                           for r in folded.to_dict("records")]

METRIC = Metric("timing", columns=(
    Column("step ms", "step_ms", ".1f", False),
    Column("startup s", "startup_s", ".1f", False),
), repeats=tuple((c, "median") for c in ("step_ms", "step_p90_ms", "startup_s", "train_s", "input_wait_fraction",
                                          "first_step_s")), derive=derive)
