"""A sweep over models (`bench sweep --models`): each approach's throughput per device against the model's size,
per device count, and where one approach overtakes another as models grow (the crossovers, interpolated in log
space between the two measured sizes they fall between)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from bench.report import memory_budget

from bench.analysis import style  # noqa: E402
from bench.analysis.verdict import ranks  # noqa: E402
from bench.metrics import present  # noqa: E402
from bench.results.frame import records_of  # noqa: E402
from bench.status import Status  # noqa: E402


@dataclass(frozen=True)
class Crossover:
    devices: int
    ahead: str        # the approach ahead at the larger model
    behind: str
    between: tuple[float, float]  # the two measured parameter counts it falls between
    params: float     # where the lines cross (log-space interpolation)
    throughput: float


def lines(configs: pd.DataFrame) -> dict[int, dict[str, list[tuple[float, float]]]]:
    """device count -> approach (its series without the model) -> [(parameters, samples/s per device)], by size;
    only where the sweep trained at least two sizes."""
    out: dict[int, dict[str, list]] = {}
    for r in records_of(configs):
        if not (r["ok"] and ranks(r["key"]) and present(r.get("params")) and present(r.get("per_device_throughput"))):
            continue
        approach = style.approach(r)
        out.setdefault(r["world_size"], {}).setdefault(approach, []).append(
            (float(r["params"]), float(r["per_device_throughput"])))
    found = {n: {a: sorted(points) for a, points in by.items()} for n, by in sorted(out.items())}
    return {n: by for n, by in found.items() if len({p for points in by.values() for p, _ in points}) >= 2}


def unfit(configs: pd.DataFrame) -> dict[int, list[tuple[float, str]]]:
    """device count -> [(parameters, approach)] that did not fit the device memory, where another run of the
    model recorded its size."""
    sizes = memory_budget.params_by_model(configs)
    out: dict[int, list] = {}
    for r in records_of(configs):
        if r["status"] == Status.DOES_NOT_FIT and ranks(r["key"]) and r["model"] in sizes:
            out.setdefault(r["world_size"], []).append((sizes[r["model"]], style.approach(r)))
    return out


def keys(configs: pd.DataFrame) -> dict[tuple[int, str, float], object]:
    """(device count, approach, parameters) -> the run key measured there: where two lines' order is read."""
    return {(r["world_size"], style.approach(r), float(r["params"])): r["key"]
            for r in records_of(configs) if r["ok"] and present(r.get("params"))}


def crossovers(found: dict[int, dict[str, list[tuple[float, float]]]],
               separated: Callable[[int, str, str, float], bool] = lambda devices, a, b, params: True
               ) -> list[Crossover]:
    """Where two approaches' lines cross between two measured sizes whose order was measured, not a tie
    (`separated`: the two approaches' throughputs at a size told apart by their interval)."""
    out = []
    for devices, by in found.items():
        names = sorted(by)
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                mine, theirs = dict(by[a]), dict(by[b])
                sizes = sorted(set(mine) & set(theirs))
                for small, large in zip(sizes, sizes[1:]):
                    before, after = math.log(mine[small] / theirs[small]), math.log(mine[large] / theirs[large])
                    if before * after >= 0 or not (separated(devices, a, b, small) and separated(devices, a, b, large)):
                        continue
                    t = before / (before - after)
                    params = math.exp(math.log(small) + t * (math.log(large) - math.log(small)))
                    at = math.exp(math.log(mine[small]) + t * (math.log(mine[large]) - math.log(mine[small])))
                    ahead, behind = (a, b) if after > 0 else (b, a)
                    out.append(Crossover(devices, ahead, behind, (small, large), params, at))
    return out


def sentences(found_crossovers: list[Crossover]) -> list[str]:
    """One per crossover, numbered as the figure marks it."""
    return [f"({i}) On {c.devices} device{'s' if c.devices > 1 else ''}, {c.ahead} overtakes {c.behind} between "
            f"{_params(c.between[0])} and {_params(c.between[1])} parameters."
            for i, c in enumerate(found_crossovers, 1)]


def _params(n: float) -> str:
    return f"{n / 1e6:.1f} M" if n >= 1e6 else f"{n / 1e3:.0f} k"


def draw(configs: pd.DataFrame, directory: Path, prefix: str,
         ratio: Callable[[object, object], object | None] = lambda key, other: None) -> tuple[list[Path], list[str]]:
    """The figure (a panel per device count) and the crossovers' sentences; nothing where fewer than two model
    sizes were trained. `ratio`: two run keys' throughput ratio with its interval (bench.analysis.repeats.Ratio),
    where the report has it: a crossing between two sizes where either order is a tie is none."""
    path = directory / f"{prefix}-model-size.png"
    path.unlink(missing_ok=True)
    found = lines(configs)
    if not found:
        return [], []
    measured_at = keys(configs)

    def separated(devices: int, a: str, b: str, params: float) -> bool:
        between = ratio(measured_at[(devices, a, params)], measured_at[(devices, b, params)])
        return between is None or not between.tie

    crossed = crossovers(found, separated)
    records = records_of(configs)
    palette = style.colours(records, style.approach)
    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found) + 0.6, 4.8), sharey=True, squeeze=False)
    first = configs.iloc[0]
    budget = f", {first['key'].budget}" if first["key"].device_memory else ""
    fig.suptitle(f"Throughput per device against model size\n{first['task']} task, {first['precision']}, "
                 f"{first['device_type']}{budget}", fontsize=9)
    refused = unfit(configs)
    names = {float(r["params"]): r["model"] for r in records if present(r.get("params"))}
    for ax, (devices, by) in zip(axes[0], found.items()):
        for params in sorted({p for points in by.values() for p, _ in points}):
            ax.annotate(names.get(params, ""), (params, 0), xycoords=("data", "axes fraction"), xytext=(3, 4),
                        textcoords="offset points", rotation=90, fontsize=7, color="grey", va="bottom", ha="left")
        for approach, points in by.items():
            ax.plot(*zip(*points), marker="o", label=approach, color=palette.get(approach))
        for i, (params, approach) in enumerate(refused.get(devices, [])):  # on the floor of the panel
            ax.plot(params, 0.04 + 0.05 * sum(p == params for p, _ in refused[devices][:i]), marker="v", markersize=8,
                    color=palette.get(approach), transform=ax.get_xaxis_transform(), linestyle="none",
                    label=f"{approach}: does not fit")
        # Numbered as the sentences under the figure name them: several crossings near one size stay legible.
        for i, c in ((i, c) for i, c in enumerate(crossed, 1) if c.devices == devices):
            ax.plot(c.params, c.throughput, marker="x", color="black", markersize=7, mew=1.5)
            ax.annotate(str(i), (c.params, c.throughput), fontsize=7, textcoords="offset points",
                        xytext=(3, 3 + 7 * (i % 3)))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{devices} device{'s' if devices > 1 else ''}", fontsize=10)
        ax.set_xlabel("parameters (log scale)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    axes[0][0].set_ylabel("samples/s per device (log scale)")
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return [path], sentences(crossed)
