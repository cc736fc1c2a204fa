"""Host CPU: the CPU time the ranks' processes (every thread of theirs: the framework's pools, the input, the
harness) spend on each training sample inside the timed windows, and how many cores that keeps busy. What the
host side costs, beside the devices: on a CPU it is the training itself, on GPUs the launch and input work that
must keep up with them. A file input's loader worker processes are not in it (they are processes of their own)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from bench.metrics import Column, Context, Metric, Ranks, Reads, present
from bench.spec.rank_record import Result

if TYPE_CHECKING:
    import pandas as pd


def fold(ranks: Ranks) -> dict:
    """Each reporting rank's CPU time over the samples it trained in the windows (its share of the global batch),
    averaged over the ranks: the job's CPU time a sample where every rank reports. None from a rank that did not
    time it (a row of an older dtbench)."""
    per_sample = []
    for result in ranks.results.values():
        cpu = result.window_cpu_seconds
        if not cpu:
            return {"host_cpu_ms_per_sample": None}
        share = result.samples_per_window * len(cpu) / ranks.world_size
        per_sample.append(1e3 * sum(cpu) / share)
    return {"host_cpu_ms_per_sample": sum(per_sample) / len(per_sample)}


def derive(folded: pd.DataFrame, context: Context) -> None:
    """Cores kept busy: CPU milliseconds a sample times samples a second. A folder whose rows all predate the
    figure gets no column of it (`bench.metrics.columns` leaves it out) rather than a column of dashes."""
    if "host_cpu_ms_per_sample" not in folded:
        return
    if not folded["host_cpu_ms_per_sample"].notna().any():
        del folded["host_cpu_ms_per_sample"]
        return
    folded["host_cores_busy"] = [ms * throughput / 1e3 if present(ms) and present(throughput) else None
                                 for ms, throughput in zip(folded["host_cpu_ms_per_sample"], folded["throughput"])]


METRIC = Metric("host_cpu", fold=fold, reads=(Reads(Result, ("window_cpu_seconds", "samples_per_window")),),
                row_fields=("host_cpu_ms_per_sample",), columns=(
    Column("host CPU ms / sample", "host_cpu_ms_per_sample", ".3f", False),
    Column("cores busy", "host_cores_busy", ".2f"),
), repeats=(("host_cpu_ms_per_sample", "median"),), derive=derive)
