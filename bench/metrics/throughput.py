"""Throughput: training samples a second over the timed windows, its median and 95 % interval (folded repeats:
the median of the run medians and the range over the runs), and per device."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.metrics import Column, Metric, Ranks, Reads, present
from bench.results import stats
from bench.spec.rank_record import Result

if TYPE_CHECKING:
    import pandas as pd


def fold(ranks: Ranks) -> dict:
    """Rank 0's windows (every rank's end in the same barrier); with input phases, the pairs' ratio."""
    throughput = stats.throughput_summary(ranks.main.window_seconds, ranks.main.samples_per_window)
    resident = ranks.main.resident_window_seconds
    phases = stats.paired_ratio(ranks.main.window_seconds, resident) if resident else None
    unsynced = ranks.main.unsynced_window_seconds
    if phases is not None and unsynced:
        phases["communication"] = stats.exposed_communication(resident, unsynced)
    return {"throughput": throughput, "per_device_throughput": throughput["median"] / ranks.world_size,
            "input_phases": phases}


def fold_repeats(ok: pd.DataFrame, line: pd.Series) -> None:
    """On a shared machine the runs drift apart more than one run's windows: the median of the run medians, and
    the range over the runs in place of the windows' interval."""
    medians = ok["throughput"]
    line["throughput"], line["ci_low"], line["ci_high"] = medians.median(), medians.min(), medians.max()
    line["runs"] = len(ok)
    line["per_device_throughput"] = line["throughput"] / line["world_size"]


def cell(line: dict) -> str:
    runs = f" ({int(line['runs'])} runs)" if present(line.get("runs")) else ""  # folded repeats: the range over runs
    return f"{line['throughput']:,.0f} [{line['ci_low']:,.0f}, {line['ci_high']:,.0f}]{runs}"


METRIC = Metric("throughput", fold=fold, reads=(Reads(Result, ("window_seconds", "samples_per_window",
                                                                 "resident_window_seconds",
                                                                 "unsynced_window_seconds")),),
                row_fields=("throughput", "per_device_throughput", "input_phases"),
                figures=("throughput", "ci_low", "ci_high", "per_device_throughput"),
                fold_repeats=fold_repeats, columns=(
    Column("throughput (samples/s) median [95% CI]", "throughput", "throughput", True, cell=cell),
    Column("per device", "per_device_throughput", ",.0f", True),
))
