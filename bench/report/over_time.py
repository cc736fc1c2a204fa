"""What each run did over time: the node agent's samples from launch to the end (bench.run.sampler), per run its
ranks' memory and CPU, how busy their slots were, on GPUs their utilisation and energy per sample."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.metrics import fmt
from bench.metrics.blocks import Block, table_section
from bench.results.frame import records_of


def table(runs: pd.DataFrame, directory: Path) -> pd.DataFrame | None:
    """Per run that was sampled (bench.run.sampler): its ranks' peak resident memory and mean CPU use, how
    busy their slots were, on GPUs their utilisation and energy per sample, and where its plot is."""
    if "timeseries.ranks" not in runs:
        return None
    sampled = runs[runs["timeseries.ranks"].notna()]
    if sampled.empty:
        return None

    def span(values) -> str:
        values = [v for v in (values if isinstance(values, list) else []) if v == v]
        if not values:
            return "-"
        low, high = fmt(min(values), ",.0f"), fmt(max(values), ",.0f")
        return low if low == high else f"{low}–{high}"  # ranks that differ below the shown digit: one figure

    body = []
    for r in records_of(sampled):
        plot = Path("runs") / r["run_id"] / "timeseries.png"
        body.append([r["key"].label, r["status"], span(r.get("timeseries.peak_rss_mb")),
                     span(r.get("timeseries.mean_cpu_pct")), span(r.get("timeseries.mean_slot_busy_pct")),
                     span(r.get("timeseries.gpu_mean_util_pct")),
                     fmt(r.get("timeseries.energy_j_per_sample"), ".4f"),
                     fmt(r.get("timeseries.sampler_cpu_fraction"), ".2%"),
                     str(plot) if (directory / plot).exists() else "(run folder not here)"])
    headers = ["run", "status", "peak RSS / rank (MiB)", "CPU / rank (% of a core)", "slot busy (%)",
               "GPU util (%)", "J / sample", "sampler CPU", "plot"]
    return pd.DataFrame(body, columns=headers)


def section(runs: pd.DataFrame, directory: Path) -> list[Block]:
    return table_section("What each run did over time", 2, (
        "Sampled every `--sample-every` seconds from launch to the end by the node agent (psutil; NVML on "
        "GPUs): each rank's resident memory with its loader processes, its CPU use, how busy the cores of "
        "its slot were (another process on them shows as busy the rank did not cause), the GPUs' "
        "utilisation and energy per training sample (their mean power after the first step over the "
        "throughput); ranges are across ranks. The sampler's own CPU is a fraction of one core. Each run's "
        "figure, ranks as lines, is in its run folder."), table(runs, directory))
