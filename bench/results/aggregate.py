"""The rows of a results folder as the report reads them: one line per configuration (run key),
repeats folded, scaling efficiencies computed by the one rule (`bench.results.key.efficiencies`).

On a shared machine throughput drifts between runs far more than between the windows of one run,
so `bench sweep --repeats R` runs the whole sweep R times, round-robin, and a configuration shows
the median of its run medians with the range over runs in place of the windows' interval. Every
run stays in results.jsonl as it was measured.
"""
from __future__ import annotations

import pandas as pd

from bench.results import peak, utilisation
from bench.results import ResultRow
from bench.results.frame import frame
from bench.results.key import RunKey, efficiencies
from bench.spec.peaks import dense_peak
from bench.spec.variants import VARIANTS

# The run frame's dotted columns under the names the report uses.
COLUMNS = {
    "throughput.median": "throughput", "throughput.ci_low": "ci_low", "throughput.ci_high": "ci_high",
    "step_time_ms.median": "step_ms", "step_time_ms.p90": "step_p90_ms", "task.name": "task",
    "task.precision": "precision", "task.model": "model", "task.dataset": "dataset",
    "task.target_accuracy": "target_accuracy", "task.params": "params",
}
FIGURES = ("throughput", "ci_low", "ci_high", "per_device_throughput", "step_ms", "step_p90_ms", "startup_s",
           "train_s", "wall_s", "test_accuracy", "test_loss", "eval_samples", "time_to_accuracy_s", "peak_memory_mb",
           "scaling_efficiency", "scaling_efficiency_vs_single", "params", "target_accuracy", "flops_per_sample",
           "achieved_tflops", "mfu", "peak_fraction", "matmul_precision", "input_wait_fraction", "compile_s",
           "first_step_s", "device_name", "cores_per_slot", "model_state_mb", "model_state_parts", "device_peak_mb",
           "device0_peak_mb", "other_devices_peak_mb")
# Folded repeats: the median over the runs of each of these.
MEDIANS = ("step_ms", "step_p90_ms", "startup_s", "train_s", "test_accuracy", "test_loss", "time_to_accuracy_s",
           "input_wait_fraction", "compile_s", "first_step_s")


def configurations(runs: pd.DataFrame, peaks: list[dict] | None = None) -> pd.DataFrame:
    """One line per run key, in first-seen order: repeats folded, efficiencies and utilisation from the
    folded medians; with `peaks` (a folder's peak.jsonl) each line's fraction of the measured peak."""
    if runs.empty:
        return runs
    # A run without a figure (a failed run's throughput: None) has a plain column beside the dotted ones.
    tidy = runs.drop(columns=[c for c in COLUMNS.values() if c in runs.columns]).rename(columns=COLUMNS)
    tidy = tidy.reindex(columns=list(dict.fromkeys([*tidy.columns, *FIGURES])))  # figures no run has: empty
    tidy["ok"] = (tidy["status"] == "ok") & tidy["throughput"].notna()
    folded = pd.DataFrame([_fold(group) for _, group in tidy.groupby("key", sort=False)]).reset_index(drop=True)
    one_device = one_device_throughputs(folded)
    scaling = [efficiencies(k, t, one_device, _single(k)) if ok else (None, None)
               for k, t, ok in zip(folded["key"], folded["throughput"], folded["ok"])]
    folded["scaling_efficiency"] = [own for own, _ in scaling]
    folded["scaling_efficiency_vs_single"] = [single for _, single in scaling]
    folded["series"] = [k.series for k in folded["key"]]
    folded["scaling"] = [k.scaling for k in folded["key"]]
    folded["per_device_batch"] = [k.per_device_batch for k in folded["key"]]
    folded["global_batch"] = [k.global_batch for k in folded["key"]]
    records = folded.to_dict("records")
    folded["achieved_tflops"] = [utilisation.tflops(_value(r["flops_per_sample"]), _value(r["throughput"]))
                                 for r in records]
    folded["mfu"] = [utilisation.fraction(_value(r["flops_per_sample"]), r["per_device_throughput"],
                                          dense_peak(_text(r["device_name"]), _text(r["matmul_precision"])))
                     for r in records]
    if peaks is not None:
        folded["peak_fraction"] = [peak.fraction_of({k: _value(v) if isinstance(v, float) else v for k, v in r.items()},
                                                    peaks) for r in records]
    return folded


def _text(value) -> str | None:
    return value if isinstance(value, str) else None


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
    medians = ok["throughput"]
    line["throughput"], line["ci_low"], line["ci_high"] = medians.median(), medians.min(), medians.max()
    line["runs"] = len(ok)
    line["per_device_throughput"] = line["throughput"] / line["world_size"]
    for column in MEDIANS:
        line[column] = ok[column].median()
    if "rank_times.behind_median" in ok and ok["rank_times.behind_median"].notna().any():
        # The rank slowest in most runs, and how far the slowest was behind the median rank over the runs.
        line["rank_times.slowest_rank"] = ok["rank_times.slowest_rank"].dropna().mode().iloc[0]
        line["rank_times.behind_median"] = ok["rank_times.behind_median"].median()
    line["peak_memory_mb"] = ok["peak_memory_mb"].fillna(0).max()
    for peak in ("device_peak_mb", "device0_peak_mb", "other_devices_peak_mb"):
        line[peak] = ok[peak].max()
    line["notes"] = list(line["notes"]) + [f"{len(ok)} runs: median of the run medians, interval = range over runs"] + failed
    return line


def _single(key: RunKey) -> str | None:
    """The framework's plain single-device loop that this variant is also held to."""
    variant = VARIANTS.get(key.variant)
    return variant.baseline if variant else None


def efficiencies_of(row: ResultRow, earlier: list[ResultRow]) -> tuple[float | None, float | None]:
    """A new run's own efficiencies, by the report's rule, against the one-device configurations the
    store held before it."""
    return efficiencies(row.key, row.throughput["median"], one_device_throughputs(
        configurations(frame([r.to_dict() for r in earlier]))), _single(row.key))


def one_device_throughputs(folded: pd.DataFrame) -> dict[RunKey, float]:
    """The baselines: each one-device, gradients-synchronised configuration's (folded) throughput."""
    if folded.empty:
        return {}
    return {k: t for k, t, ok in zip(folded["key"], folded["throughput"], folded["ok"])
            if ok and k.world_size == 1 and not k.independent}


def _value(figure) -> float | None:
    return None if figure is None or pd.isna(figure) else float(figure)
