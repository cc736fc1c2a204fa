"""Where a run's time goes at the scale of a step and a start: the median step (and its p90), start-up to the
first step's end, the first step itself (compilation: a compiled run's compile time) and the windows' share spent
waiting for input."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.metrics import Column, Context, Metric, Ranks, Reads
from bench.results import stats
from bench.results.frame import records_of
from bench.spec.rank_record import FirstStep, Joined, Result

if TYPE_CHECKING:
    import pandas as pd


def fold(ranks: Ranks) -> dict:
    main = ranks.main
    first_steps = [e.time for e in ranks.events(FirstStep)]
    return {
        "step_time_ms": stats.step_time_ms(main.window_seconds, main.window_steps),
        # Start-up ends when the slowest rank has finished its first step.
        "startup_s": max(first_steps) - ranks.launch_time if first_steps else None,
        "engine_startup_s": engine_startup(ranks),
        "train_s": main.train_s,
        "first_step_s": main.first_step_s,
        # None where the loop fetches batches inside the step (TensorFlow) and the wait cannot be timed.
        "input_wait_fraction": (main.input_wait_s / sum(main.window_seconds)
                                if main.input_wait_s is not None else None),
    }


def engine_startup(ranks: Ranks) -> float | None:
    """An engine's run (--engine): launch to the engine handing its function to the last rank (its cluster started,
    the rank scheduled); None for a launcher's run."""
    handovers = [joined[-1].engine_handover for joined in
                 (ranks.events(Joined, rank) for rank in ranks.results) if joined]
    if not handovers or None in handovers:
        return None
    return max(handovers) - ranks.launch_time


def derive(folded: pd.DataFrame, context: Context) -> None:
    """A compiled run's compile time: its first step, which no window times. The engines' start-up column only in
    a table that holds an engine's run."""
    folded["compile_s"] = [r["first_step_s"] if r.get("task.compile") is True else None
                           for r in records_of(folded)]
    if "engine_startup_s" in folded and folded["engine_startup_s"].isna().all():
        del folded["engine_startup_s"]


METRIC = Metric("timing", fold=fold, reads=(
    Reads(Result, ("window_seconds", "window_steps", "train_s", "first_step_s", "input_wait_s")),
    Reads(FirstStep, ("time",)),
    Reads(Joined, ("engine_handover",)),
), row_fields=("step_time_ms", "startup_s", "engine_startup_s", "train_s", "first_step_s", "input_wait_fraction"),
    figures=("step_ms", "step_p90_ms", "startup_s", "train_s", "wall_s", "input_wait_fraction", "compile_s",
             "first_step_s"), columns=(
    Column("step ms", "step_ms", ".1f", False),
    Column("startup s", "startup_s", ".1f", False),
    Column("engine s", "engine_startup_s", ".1f", False),
), repeats=tuple((c, "median") for c in ("step_ms", "step_p90_ms", "startup_s", "engine_startup_s", "train_s", "input_wait_fraction",
                                          "first_step_s")), derive=derive)
