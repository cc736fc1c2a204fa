"""Repeated runs of one configuration folded into one displayed row.

On a shared machine throughput drifts between runs far more than between the windows of one run,
so `bench sweep --repeats R` runs the whole sweep R times, round-robin, and the report shows per
configuration the median of the run medians with the range over runs in place of the windows'
interval. Every run stays in results.jsonl as it was measured.
"""
from __future__ import annotations

import dataclasses
import statistics

from bench import stats
from bench.results import ResultRow
from bench.variants import VARIANTS


def key(r: ResultRow) -> tuple:
    return (r.variant, r.nodes, r.devices_per_node, r.device_type, r.engine, r.task["name"],
            r.task["precision"], r.independent)


def _median(values: list) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def fold_runs(runs: list[ResultRow]) -> ResultRow:
    """One row for several runs of one configuration (a single run is returned as it is)."""
    ok = [r for r in runs if r.status == "ok" and r.throughput]
    if len(runs) == 1 or not ok:
        return runs[-1]
    medians = [r.throughput["median"] for r in ok]
    median = statistics.median(medians)
    notes = [f"{len(ok)} runs: median of the run medians, interval = range over runs"]
    if len(ok) < len(runs):
        notes.append(f"{len(runs) - len(ok)} of {len(runs)} runs did not finish ok")
    return dataclasses.replace(
        ok[-1],
        throughput={"median": median, "ci_low": min(medians), "ci_high": max(medians), "windows": medians,
                    "runs": len(ok)},
        per_device_throughput=median / ok[-1].world_size,
        step_time_ms={"median": _median([r.step_time_ms["median"] for r in ok if r.step_time_ms]),
                      "p90": _median([r.step_time_ms["p90"] for r in ok if r.step_time_ms])},
        startup_s=_median([r.startup_s for r in ok]), train_s=_median([r.train_s for r in ok]),
        test_accuracy=_median([r.test_accuracy for r in ok]), test_loss=_median([r.test_loss for r in ok]),
        time_to_accuracy_s=_median([r.time_to_accuracy_s for r in ok]),
        peak_memory_mb=max((r.peak_memory_mb or 0) for r in ok), notes=ok[-1].notes + notes)


def fold_all(rows: list[ResultRow]) -> list[ResultRow]:
    """Rows in first-seen order, repeats folded, efficiencies recomputed from the folded medians."""
    groups: dict[tuple, list[ResultRow]] = {}
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    folded = [fold_runs(runs) for runs in groups.values()]
    if all(len(runs) == 1 for runs in groups.values()):
        return folded
    one_device = {(r.variant, r.device_type, r.engine, r.task["name"], r.task["precision"]): r.throughput["median"]
                  for r in folded if r.status == "ok" and r.world_size == 1 and not r.independent and r.throughput}
    out = []
    for r in folded:
        if r.status == "ok" and r.throughput and not r.independent:
            base = (r.device_type, r.engine, r.task["name"], r.task["precision"])
            variant = VARIANTS.get(r.variant)
            # The plain single-device loop has no engine: any engine's run is held to the same one.
            single = (one_device.get((variant.baseline, r.device_type, "local", r.task["name"], r.task["precision"]))
                      if variant and variant.baseline else None)
            r = dataclasses.replace(
                r, scaling_efficiency=None if r.world_size == 1 else stats.scaling_efficiency(
                    r.throughput["median"], r.world_size, one_device.get((r.variant, *base))),
                scaling_efficiency_vs_single=stats.scaling_efficiency(r.throughput["median"], r.world_size, single))
        out.append(r)
    return out
