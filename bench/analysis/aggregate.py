"""The rows of a results folder as the report reads them: one line per configuration (run key),
repeats folded as each metric says, then every metric's figures derived once from the folded lines
(bench.metrics: scaling efficiency by the one rule of `bench.results.key.efficiencies`, MFU, cost).

On a shared machine throughput drifts between runs far more than between the windows of one run,
so `bench sweep --repeats R` runs the whole sweep R times, round-robin, and a configuration shows
the median of its run medians with the range over runs in place of the windows' interval. Every
run stays in results.jsonl as it was measured.
"""
from __future__ import annotations

import pandas as pd

from bench import metrics
from bench.status import Status

# The run frame's dotted columns under the names the report uses.
COLUMNS = {
    "throughput.median": "throughput", "throughput.ci_low": "ci_low", "throughput.ci_high": "ci_high",
    "step_time_ms.median": "step_ms", "step_time_ms.p90": "step_p90_ms", "task.name": "task",
    "task.precision": "precision", "task.model": "model", "task.dataset": "dataset",
    "task.target_accuracy": "target_accuracy", "task.params": "params",
}
# Provenance beside the metrics' figures (bench.metrics.figures) in every line.
PROVENANCE = ("device_name", "cores_per_slot")


def configurations(runs: pd.DataFrame, peaks: list[dict] | None = None, settings: dict | None = None) -> pd.DataFrame:
    """One line per run key, in first-seen order: repeats folded, then every metric's figures derived from the
    folded lines (bench.metrics); with `peaks` (a folder's peak.jsonl) each line's fraction of the measured peak,
    with `settings` the metrics' options (a price per device-hour)."""
    if runs.empty:
        return runs
    # A run without a figure (a failed run's throughput: None) has a plain column beside the dotted ones.
    tidy = runs.drop(columns=[c for c in COLUMNS.values() if c in runs.columns]).rename(columns=COLUMNS)
    tidy = tidy.reindex(columns=list(dict.fromkeys([*tidy.columns, *metrics.figures(), *PROVENANCE])))  # none: empty
    tidy["ok"] = (tidy["status"] == Status.OK) & tidy["throughput"].notna()
    folded = pd.DataFrame([_fold(group) for _, group in tidy.groupby("key", sort=False)]).reset_index(drop=True)
    folded["series"] = [k.series for k in folded["key"]]
    folded["scaling"] = [k.scaling for k in folded["key"]]
    folded["per_device_batch"] = [k.per_device_batch for k in folded["key"]]
    folded["global_batch"] = [k.global_batch for k in folded["key"]]
    metrics.derive(folded, metrics.Context(peaks, settings or {}))
    return folded


def _fold(runs: pd.DataFrame) -> pd.Series:
    """One configuration's runs -> one line (a single run as it is)."""
    ok = runs[runs["ok"]]
    if len(runs) == 1 or ok.empty:
        return runs.iloc[-1]
    line = ok.iloc[-1].copy()
    failed = [f"{len(runs) - len(ok)} of {len(runs)} runs did not finish ok"] if len(ok) < len(runs) else []
    if len(ok) == 1:  # the one run that finished, with its own window interval: no spread over runs to show
        line["notes"] = list(line["notes"]) + failed
        return line
    metrics.fold_repeats(ok, line)
    line["notes"] = list(line["notes"]) + [f"{len(ok)} runs: median of the run medians, interval = range over runs"] + failed
    return line

