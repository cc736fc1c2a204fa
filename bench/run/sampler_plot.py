"""One run over time (its samples, bench.run.sampler): each rank's resident memory and CPU use, how busy its slot's
cores were, and on GPUs each device's utilisation and power; ranks (and GPUs) as lines, the time from launch on
the x axis. Drawn into the run folder as timeseries.png."""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on benchmark machines
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

PLOT = "timeseries.png"


def draw(frame: pd.DataFrame, run_dir: Path, title: str, cores: dict[int, list[int]]) -> Path:
    """The run's figure from its samples (bench.run.sampler.COLUMNS). `cores`: each rank's slot, for its busy line."""
    ranks, busy, gpus = (frame[frame["kind"] == kind] for kind in ("rank", "core", "gpu"))
    panels = [("resident memory (MiB)", ranks, "rss_mb", "rank"), ("CPU use (% of one core)", ranks, "cpu_pct", "rank"),
              ("busy cores of its slot (%)", _slot_busy(busy, cores), "busy_pct", "rank")]
    if not gpus.empty:
        panels += [("GPU utilisation (%)", gpus, "util_pct", "GPU"), ("GPU power (W)", gpus, "power_w", "GPU"),
                   ("GPU memory used (MiB)", gpus, "mem_mb", "GPU")]
    fig, axes = plt.subplots(len(panels), 1, figsize=(9, 2.1 * len(panels)), sharex=True, squeeze=False)
    for ax, (label, data, column, who) in zip(axes[:, 0], panels):
        for index, line in data.groupby("index"):
            ax.plot(line["t_s"], line[column], label=f"{who} {index}", linewidth=1.2)
        ax.set_ylabel(label, fontsize=8)
        ax.grid(alpha=0.3)
        if data["index"].nunique() > 0:
            ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    axes[-1, 0].set_xlabel("seconds since launch")
    fig.suptitle(title, fontsize=9)
    # Fixed margins, room on the right for the legends: tight_layout measured every text first, most of the draw.
    fig.subplots_adjust(left=0.09, right=0.85, top=1 - 0.25 / fig.get_figheight(), bottom=0.45 / fig.get_figheight(),
                        hspace=0.12)
    fig.savefig(run_dir / PLOT, dpi=90)
    plt.close(fig)
    return run_dir / PLOT


def _slot_busy(busy: pd.DataFrame, cores: dict[int, list[int]]) -> pd.DataFrame:
    """Per rank and sample: the mean busy of its slot's cores."""
    if busy.empty or not cores:
        return busy.iloc[0:0]
    lines = [busy[busy["index"].isin(slot)].groupby("t_s", as_index=False)["busy_pct"].mean().assign(index=rank)
             for rank, slot in cores.items()]
    return pd.concat(lines, ignore_index=True)
