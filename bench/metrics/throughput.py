"""Throughput: training samples a second over the timed windows, its median and 95 % interval (folded repeats:
the median of the run medians and the range over the runs), and per device."""
from __future__ import annotations

from bench.metrics import Column, Metric, present


def cell(line: dict) -> str:
    runs = f" ({int(line['runs'])} runs)" if present(line.get("runs")) else ""  # folded repeats: the range over runs
    return f"{line['throughput']:,.0f} [{line['ci_low']:,.0f}, {line['ci_high']:,.0f}]{runs}"


METRIC = Metric("throughput", columns=(
    Column("throughput (samples/s) median [95% CI]", "throughput", "throughput", True, cell=cell),
    Column("per device", "per_device_throughput", ",.0f", True),
))
