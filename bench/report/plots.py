"""PNG plots of a results store, readable in a paper: titles, units, legends, interval error bars."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on benchmark machines
import matplotlib.pyplot as plt  # noqa: E402

import pandas as pd  # noqa: E402

from bench.analysis import style  # noqa: E402
from bench.analysis.verdict import name_in_group  # noqa: E402
from bench.spec.variants import VARIANTS, panel, panels  # noqa: E402
from bench.metrics import present  # noqa: E402
from bench.results.frame import records_of  # noqa: E402
from bench.status import Status  # noqa: E402


def _series(rows: list[dict]) -> dict[str, list[dict]]:
    """ok configurations per series (and nodes, when a sweep split devices over fake nodes), by device count; named
    less the model and the memory budget, which the plot's title names."""
    series = defaultdict(list)
    for r in rows:
        if r["status"] == Status.OK and present(r["throughput"]):
            series[name_in_group(r)].append(r)
    return {k: sorted(v, key=lambda r: r["world_size"]) for k, v in sorted(series.items())}


def _title(base: str, rows: list[dict]) -> str:
    first = rows[0]
    data = "synthetic data" if first["dataset"] == "synthetic" else first["dataset"]
    device = first["device_name"] if present(first.get("device_name")) else first["device_type"]
    models = list(dict.fromkeys(r["model"] for r in rows))
    model = models[0] if len(models) == 1 else f"{len(models)} models"
    budget = f", {first['key'].budget}" if "key" in first and first["key"].device_memory else ""
    return f"{base}\n{first['task']}: {model} on {data}, {first['precision']}, {device}{budget}"


def _panel(r: dict) -> str:
    """Its panel in a sweep's line plots (bench.spec.variants.panels)."""
    variant = VARIANTS.get(r["key"].variant)
    return panel(variant.framework) if variant else "other"


def _panels(rows: list[dict], title: str):
    """One axes per panel present (sharing the y axis), in a fixed order: (figure, [(panel, rows, axes)])."""
    order = [*panels(), "other"]
    families = {}
    for r in sorted(rows, key=lambda r: order.index(_panel(r))):
        families.setdefault(_panel(r), []).append(r)
    fig, axes = plt.subplots(1, len(families), figsize=(4.6 * len(families) + 0.6, 5.0), sharey=True, squeeze=False)
    fig.suptitle(_title(title, rows), fontsize=9)
    return fig, [(name, rs, ax) for (name, rs), ax in zip(families.items(), axes[0])]


def _panel_legend(ax, name: str) -> None:
    """The real runs only (their twins' styles are in the title), under the panel."""
    ax.set_title(name, fontsize=10)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)


def throughput(rows: list[dict], path: Path) -> None:
    fig, panels = _panels(rows, "Training throughput: median and 95% CI; faint dotted = linear scaling; "
                                "light dashed = no-sync bound, light dotted = synthetic input")
    palette = style.colours(rows)
    for name, family, ax in panels:
        for label, rs in _series(family).items():
            xs = [r["world_size"] for r in rs]
            ys = [r["throughput"] for r in rs]
            err = [[y - r["ci_low"] for y, r in zip(ys, rs)], [r["ci_high"] - y for y, r in zip(ys, rs)]]
            look = style.line_style(rs[0], palette)
            real = style.twin(rs[0]) is None
            ax.errorbar(xs, ys, yerr=err, capsize=3, label=label if real else "_twin", **look)
            one = next((r for r in rs if r["world_size"] == 1), None)
            if one is not None and len(xs) > 1 and real:  # ideal scaling from its own 1-device run
                ax.plot(xs, [one["throughput"] * x for x in xs], ls=(0, (1, 3)), lw=1, color=look["color"],
                        alpha=0.6)
        _device_axis(ax, rows)
        ax.set_ylim(0, ax.get_ylim()[1] * 1.06)  # headroom: one device count alone leaves none above its points
        ax.grid(alpha=0.3)
        _panel_legend(ax, name)
    panels[0][2].set_ylabel("throughput (samples/s)")
    _save(fig, path)


def efficiency(rows: list[dict], path: Path) -> None:
    baseline = ("weak scaling: vs 1 device at the same per-device batch" if rows[0]["scaling"] == "weak"
                else "strong scaling: vs 1 device at the same global batch")
    fig, panels = _panels(rows, f"Scaling efficiency ({baseline})")
    palette = style.colours(rows)
    drawn = False
    for name, family, ax in panels:
        for label, rs in _series(family).items():
            # By definition 1.0 at one device: drawn so that each variant is a line, not a lone point.
            points = [(r["world_size"], 1.0 if r["world_size"] == 1 else r["scaling_efficiency"]) for r in rs
                      if r["world_size"] == 1 or present(r["scaling_efficiency"])]
            if len(points) > 1 or any(x > 1 for x, _ in points):
                real = style.twin(rs[0]) is None
                ax.plot(*zip(*points), label=label if real else "_twin", **style.line_style(rs[0], palette))
                drawn = True
        ax.axhline(1.0, ls="--", color="grey", lw=1)
        _device_axis(ax, rows)
        ax.set_ylim(0, 1.2)
        ax.grid(alpha=0.3)
        _panel_legend(ax, name)
    panels[0][2].set_ylabel("scaling efficiency = T(N) / (N x T(1))")
    if not drawn:  # no one-device baseline measured (a sweep --no-analysis): no efficiency to show
        plt.close(fig)
        return
    _save(fig, path)


def _bars(ax, rows: list[dict], value, ylabel: str) -> list[dict]:
    """One bar per configuration with a `value`; the configurations drawn, in the bars' order."""
    palette = style.colours(rows)
    labels, values, looks, drawn = [], [], [], []
    for label, rs in _series(rows).items():
        for r in rs:
            v = value(r)
            if present(v):  # unmeasured: no bar at all, not a zero-height one
                labels.append(f"{label}, {r['world_size']} dev")
                values.append(v)
                looks.append(style.bar_style(r, palette))
                drawn.append(r)
    for i, (v, look) in enumerate(zip(values, looks)):
        ax.bar(i, v, **look)
    style.bar_labels(ax, labels)
    ax.set_ylabel(ylabel)
    ax.grid(axis="y", alpha=0.3)
    return drawn


def accuracy(rows: list[dict], path: Path) -> None:
    if not any(present(r["test_accuracy"]) for r in rows):  # nothing evaluated (a function without dtbench.evaluate)
        return
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.8))
    _bars(left, rows, lambda r: r["test_accuracy"], "test accuracy (whole test set)")
    target = rows[0]["target_accuracy"]
    measured = [r["test_accuracy"] for r in rows if present(r["test_accuracy"])]
    if measured:  # the axis where the accuracies are: a point apart must show, and the target with them
        floor = max(0.0, min(measured + ([target] if present(target) else [])) - 0.03)
        left.set_ylim(floor, min(1.0, max(measured) + 0.02))
        left.set_ylabel(f"test accuracy (whole test set; axis from {floor:.2f})")
    if present(target):
        left.axhline(target, ls="--", color="red", lw=1, label=f"target {target:.0%}")
        left.legend(fontsize=8, loc="lower right")
    _bars(right, rows, lambda r: r["time_to_accuracy_s"], "time to target accuracy (s, training only)")
    fig.suptitle(_title("Accuracy and time to accuracy", rows), fontsize=9)
    _save(fig, path)


def startup(rows: list[dict], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(9, 4.8))
    drawn = _bars(ax, rows, lambda r: r["startup_s"], "startup (s): launch to end of first step")
    # An engine's run: the engine's own part (its cluster up, the ranks handed their function) hatched over it.
    engines = [(i, r["engine_startup_s"]) for i, r in enumerate(drawn) if present(r.get("engine_startup_s"))]
    for n, (i, part) in enumerate(engines):
        ax.bar(i, part, color="none", edgecolor="black", hatch="//", lw=0.8,
               label="the engine's own part" if n == 0 else "_engine")
    if engines:
        ax.legend(fontsize=8, loc="upper left")
    ax.set_title(_title("Startup time", rows), fontsize=9)
    _save(fig, path)


def _device_axis(ax, rows: list[dict]) -> None:
    counts = sorted({r["world_size"] for r in rows if r["status"] == Status.OK})
    ax.set_xscale("log", base=2)
    ax.set_xticks(counts, [str(c) for c in counts])
    ax.minorticks_off()
    ax.set_xlabel("devices (log2 scale)")


def _save(fig, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=120, bbox_inches="tight")  # "tight": the legend outside the axes stays in the file
    plt.close(fig)


def draw_breakdown(entries: list[dict], directory: Path, prefix: str) -> list[Path]:
    """Each multi-device run's step time next to its compute-only time and the all-reduce floor."""
    if not entries:
        return []
    fig, ax = plt.subplots(figsize=(9, 5))
    labels = [f"{e['row']['series']}, {e['row']['world_size']} dev" for e in entries]
    width = 0.2
    for offset, key, name, colour in ((-1.5 * width, "step_ms", "measured step", "#4c72b0"),
                                      (-0.5 * width, "compute_ms", "compute only (no sync)", "#a1c4e8"),
                                      (0.5 * width, "exposed_ms", "exposed communication", "#c44e52"),
                                      (1.5 * width, "floor_ms", "all-reduce floor", "#dd8452")):
        measured = [(i + offset, e[key]) for i, e in enumerate(entries) if present(e[key])]
        if measured:  # unmeasured figures (TensorFlow has no no-sync twin or floor) are left out, not drawn as 0
            ax.bar(*zip(*measured), width, label=name, color=colour)
    style.bar_labels(ax, labels)
    ax.set_ylabel("time per step (ms)")
    ax.set_title(_title("Where the step time goes (no bar: not measured)", [e["row"] for e in entries]), fontsize=9)
    style.legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    path = directory / f"{prefix}-step-breakdown.png"
    _save(fig, path)
    return [path]


def draw_inputs(comparison: dict | None, directory: Path, prefix: str) -> list[Path]:
    """Throughput per input pipeline, grouped by variant and device count (the report's input table)."""
    path = directory / f"{prefix}-input.png"
    path.unlink(missing_ok=True)
    if comparison is None:
        return []
    modes, groups = comparison["modes"], comparison["groups"]
    fig, ax = plt.subplots(figsize=(max(7, 0.45 * len(groups) * len(modes)), 4.5))
    width = 0.8 / len(modes)
    for i, mode in enumerate(modes):
        drawn = [(g, by_mode[mode]["throughput"]) for g, (_, _, by_mode) in enumerate(groups) if mode in by_mode]
        ax.bar([g + i * width for g, _ in drawn], [t for _, t in drawn], width, label=mode)
    ax.set_xticks([g + width * (len(modes) - 1) / 2 for g in range(len(groups))],
                  [f"{series}\n{devices} dev" for series, devices, _ in groups], fontsize=8)
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(_title("Throughput per input pipeline: the same images from memory, files and S3",
                        [next(iter(by_mode.values())) for _, _, by_mode in groups]), fontsize=9)
    style.legend_outside(ax, title="input")
    ax.grid(alpha=0.3, axis="y")
    _save(fig, path)
    return [path]


def draw_memory(entries: list[dict], directory: Path, prefix: str) -> list[Path]:
    """Memory per device against throughput, a point per configuration: the trade-off sharding makes."""
    path = directory / f"{prefix}-memory.png"
    path.unlink(missing_ok=True)
    points = [e["row"] for e in entries if present(e["row"]["device_peak_mb"]) and present(e["row"]["throughput"])]
    if not points:
        return []
    models = list(dict.fromkeys(r["model"] for r in points))
    title = "Memory per device against throughput (points labelled by device count)"
    xlabel = "peak memory per device (MiB; CUDA allocated after warm-up, CPU peak RSS)"
    if len(models) > 1:  # a sweep over models: a colour per approach, a marker per model, throughput on a log scale
        fig, ax = plt.subplots(figsize=(9, 4.5))
        _memory_by_model(ax, points, models)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("throughput (samples/s)")
        ax.set_title(_title(title, points), fontsize=9)
        style.legend_outside(ax)
        ax.grid(alpha=0.3)
    else:  # a panel per family, as the throughput plot: no legend holds the whole sweep
        fig, panels = _panels(points, "Peak memory per device (CUDA allocated after warm-up, CPU peak RSS) against "
                                      "throughput, points labelled by device count; light dotted, open = synthetic input")
        palette = style.colours(points)
        for name, family, ax in panels:
            _memory_by_approach(ax, family, palette)
            ax.set_xlabel("peak MiB per device")
            ax.grid(alpha=0.3)
            _panel_legend(ax, name)
        panels[0][2].set_ylabel("throughput (samples/s)")
    _save(fig, path)
    return [path]


MODEL_MARKERS = "osD^vP*Xph"


def _memory_by_model(ax, points: list[dict], models: list[str]) -> None:
    palette = style.colours(points, style.approach)
    for r in points:
        ax.plot(r["device_peak_mb"], r["throughput"], linestyle="none", color=palette[style.approach(r)],
                marker=MODEL_MARKERS[models.index(r["model"]) % len(MODEL_MARKERS)], markersize=7)
        ax.annotate(f"{r['world_size']}", (r["device_peak_mb"], r["throughput"]), fontsize=7,
                    textcoords="offset points", xytext=(4, 4))
    for name, colour in palette.items():
        ax.plot([], [], color=colour, linewidth=6, label=name)
    for i, model in enumerate(models):
        ax.plot([], [], color="grey", linestyle="none", marker=MODEL_MARKERS[i % len(MODEL_MARKERS)], label=model)
    ax.set_yscale("log")


def _memory_by_approach(ax, points: list[dict], palette: dict) -> None:
    for label, rs in _series(points).items():
        ax.plot([r["device_peak_mb"] for r in rs], [r["throughput"] for r in rs],
                label=label if style.twin(rs[0]) is None else "_twin", **style.line_style(rs[0], palette))
        for r in rs:
            ax.annotate(f"{r['world_size']}", (r["device_peak_mb"], r["throughput"]), fontsize=7,
                        textcoords="offset points", xytext=(4, 4))


def draw_utilisation(entries: list[dict], directory: Path, prefix: str) -> list[Path]:
    """Per configuration: the fraction of the measured matmul peak per device (and MFU where known)."""
    rows = [e["row"] for e in entries if present(e["row"]["peak_fraction"]) or present(e["row"]["mfu"])]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(8, 5))
    labels = [f"{r['series']}, {r['world_size']} dev" for r in rows]
    # A peak no row knows (no data-sheet figure on a CPU) gets no bars at all, not zero-height ones.
    shown = [(key, name, colour) for key, name, colour in (("peak_fraction", "of the measured peak", "#4c72b0"),
                                                           ("mfu", "MFU (data-sheet dense peak)", "#55a868"))
             if any(present(r[key]) for r in rows)]
    width = 0.8 / len(shown)
    for j, (key, name, colour) in enumerate(shown):
        offset = (j - (len(shown) - 1) / 2) * width
        known = [(i + offset, 100 * r[key]) for i, r in enumerate(rows) if present(r[key])]
        ax.bar(*zip(*known), width, label=name, color=colour)
    style.bar_labels(ax, labels)
    ax.set_ylabel("utilisation per device (%)")
    ax.set_title(_title("How close to the hardware (no bar: not known)", rows), fontsize=9)
    style.legend_outside(ax)
    ax.grid(axis="y", alpha=0.3)
    path = directory / f"{prefix}-utilisation.png"
    _save(fig, path)
    return [path]


def loss_curves(rows: list[dict], path: Path) -> None:
    """Rank 0's training loss (every few steps) and each epoch's test loss, one line per variant and device
    count, against samples seen and against training seconds (pauses excluded): a row of panels per group
    (bench.spec.variants.panels), its legend beside it, so that no legend holds a whole sweep."""
    # A synthetic batch is learnt by heart and no-sync replicas train apart: neither is a training curve.
    curves = [r for r in rows if not r["independent"] and r["key"].input != "synthetic"
              and r["dataset"] != "synthetic" and isinstance(r.get("curves.steps"), list) and r["curves.steps"]]
    families = {}
    order = [*panels(), "other"]
    for r in sorted(curves, key=lambda r: order.index(_panel(r))):
        families.setdefault(_panel(r), []).append(r)
    if not families:
        return
    fig, axes = plt.subplots(len(families), 2, figsize=(12, 0.6 + 3.6 * len(families)), sharey=True, squeeze=False)
    palette = style.colours(rows)
    for (family, members), (by_samples, by_seconds) in zip(families.items(), axes):
        counts = sorted({r["world_size"] for r in members})
        for label, rs in _series(members).items():
            for r in rs:
                steps = r["curves.steps"]
                dashes = _dashes(r["world_size"])
                line, = by_samples.plot([s[1] for s in steps], [s[3] for s in steps], lw=1.2, ls=dashes,
                                        color=palette[style.base(r)])
                # The legend (right of this panel): a colour per approach, then a line style per device count.
                by_seconds.plot([s[2] for s in steps], [s[3] for s in steps], lw=1.2, ls=dashes,
                                color=line.get_color(), label=label if r is rs[0] else "_same")
                epochs = [e for e in (r.get("curves.epochs") or []) if e[4] is not None]
                if epochs:  # the test loss at each epoch's end, as markers on the same colour
                    by_samples.plot([e[1] for e in epochs], [e[4] for e in epochs], "o", ms=4, color=line.get_color())
                    by_seconds.plot([e[2] for e in epochs], [e[4] for e in epochs], "o", ms=4,
                                    color=line.get_color())
        if len(counts) > 1:
            for n in counts:
                by_seconds.plot([], [], color="black", lw=1.2, ls=_dashes(n), label=f"{n} dev")
        by_samples.set_title(family, fontsize=10, loc="left")
        by_samples.set_ylabel("loss")
        for ax in (by_samples, by_seconds):
            ax.set_yscale("log")
            ax.grid(alpha=0.3)
        style.legend_outside(by_seconds)
    axes[-1][0].set_xlabel("samples seen")
    axes[-1][1].set_xlabel("training seconds (evaluation excluded)")
    fig.suptitle(_title("Loss curves (lines: training loss, rank 0; dots: test loss, each epoch)", rows), fontsize=9)
    _save(fig, path)


DEVICE_DASHES = ("-", "--", "-.", ":", (0, (5, 1, 1, 1, 1, 1)))  # 1, 2, 3-4, 5-8, more devices


def _dashes(devices: int):
    return DEVICE_DASHES[min(len(DEVICE_DASHES), devices.bit_length()) - 1]

PLOTS = {"throughput": throughput, "efficiency": efficiency, "accuracy": accuracy, "startup": startup,
         "loss": loss_curves}


def draw_all(configs: pd.DataFrame, directory: Path, prefix: str) -> list[Path]:
    """One PNG per plot for one task's configurations; plots with nothing to show are not written. A sweep over
    models draws each model's on its own (PREFIX-MODEL-PLOT.png): one model's approaches to a plot, as always."""
    models = list(dict.fromkeys(configs["model"])) if "model" in configs else []
    if len(models) > 1:
        return [path for model in models
                for path in _draw_all(configs[configs["model"] == model], directory,
                                      f"{prefix}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', model)}")]
    return _draw_all(configs, directory, prefix)


def _draw_all(configs: pd.DataFrame, directory: Path, prefix: str) -> list[Path]:
    rows = records_of(configs)
    written = []
    if not _series(rows):
        return written
    for name, draw in PLOTS.items():
        path = directory / f"{prefix}-{name}.png"
        path.unlink(missing_ok=True)  # a plot with nothing to draw leaves no file, not an older one
        draw(rows, path)
        if path.exists():
            written.append(path)
    return written


def draw_verdict(groups: list, directory: Path, prefix: str) -> list[Path]:
    """The verdict's comparisons: each approach's throughput against the group's fastest, with the ratio's
    95 % interval, a panel per device count; a line at 1, ties and too-noisy comparisons marked."""
    path = directory / f"{prefix}-verdict.png"
    path.unlink(missing_ok=True)
    groups = [g for g in groups if g.winner is not None and (g.comparisons or g.unfit)]
    if not groups:
        return []
    palette = style.colours([g.winner for g in groups] + [c.other for g in groups for c in g.comparisons],
                            style.approach)
    heights = [len(g.comparisons) + len(g.unfit) + 1 for g in groups]
    fig, axes = plt.subplots(len(groups), 1, figsize=(10, 0.9 + 0.38 * sum(heights) + 0.45 * len(groups)),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    ranked = [c for g in groups for c in g.comparisons if not c.noisy]
    lowest = min([1 / c.ratio.high for c in ranked] + [1 / c.ratio.value for g in groups for c in g.comparisons])
    log = lowest < 0.2
    for ax, group in zip(axes[:, 0], groups):
        names = [style.approach(group.winner)] + [style.approach(c.other) for c in group.comparisons]
        ax.barh(0, 1, color=palette[names[0]], height=0.6)
        _note(ax, 0, "fastest")
        for y, c in enumerate(group.comparisons, start=1):
            value, low, high = 1 / c.ratio.value, 1 / c.ratio.high, 1 / c.ratio.low
            colour = palette[style.approach(c.other)]
            if c.noisy:  # its interval says nothing: no error bar, a hatched bar and the words
                ax.barh(y, value, color=style.lighter(colour, 0.75), height=0.6, hatch="//", edgecolor=colour)
                text = "too noisy to rank: repeat the runs"
            else:
                ax.barh(y, value, color=colour, height=0.6)
                ax.errorbar(value, y, xerr=[[value - low], [high - value]], color="black", capsize=3, lw=1)
                text = f"{value:.2f} [{low:.2f}, {high:.2f}]  " + ("tie" if c.ratio.tie else f"{c.ratio.value:.2f}x slower")
            _note(ax, y, text)
        for y, r in enumerate(group.unfit, start=len(names)):  # no bar: it never trained under the budget
            _note(ax, y, f"does not fit in {r['key'].budget or 'the device memory'}")
        ax.axvline(1, color="black", lw=1)
        ax.set_yticks(range(len(names) + len(group.unfit)),
                      [name_in_group(r) for r in (group.winner, *(c.other for c in group.comparisons), *group.unfit)],
                      fontsize=8)
        ax.invert_yaxis()
        ax.set_xscale("log" if log else "linear")
        ax.set_xlim(left=lowest * 0.8 if log else 0, right=2 if log else 1.5)
        if log:
            ticks = [t for t in (0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1) if t >= lowest * 0.8]
            ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
            ax.minorticks_off()
        ax.set_title(group.title, fontsize=8.5, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("throughput relative to the fastest (1 = as fast; bars: the ratio's 95 % interval)")
    fig.suptitle(_title("The verdict: each approach against the fastest synchronous one",
                        [g.winner for g in groups]), fontsize=9)
    _save(fig, path)
    return [path]


def _note(ax, y: float, text: str) -> None:
    """A comparison's figures in a column right of the axes, clear of the bars and their intervals."""
    ax.annotate(text, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(6, -3), textcoords="offset points",
                fontsize=7.5, va="center")


def draw_tuned(found: list, directory: Path, prefix: str) -> list[Path]:
    """Each approach as shipped and at its best setting of its own knobs, side by side with their throughputs'
    95 % intervals, a panel per ranking (bench.analysis.tuned)."""
    from bench.analysis.tuned import gain_text, label

    path = directory / f"{prefix}-tuned.png"
    path.unlink(missing_ok=True)
    if not found:
        return []
    palette = style.colours([t.best for _, approaches in found for t in approaches], style.approach)
    fig, axes = plt.subplots(len(found), 1, figsize=(10, 1.2 + 0.75 * sum(len(a) for _, a in found)), squeeze=False)
    for ax, (group, approaches) in zip(axes[:, 0], found):
        for y, t in enumerate(approaches):
            colour = palette[style.approach(t.best)]
            for offset, line, shade, name in ((-0.2, t.shipped, 0.6, "as shipped"), (0.2, t.best, 0.0, "at its best")):
                if line is None or not line["ok"]:
                    continue
                value, low, high = line["throughput"], line.get("ci_low"), line.get("ci_high")
                ax.barh(y + offset, value, height=0.38, color=style.lighter(colour, shade) if shade else colour,
                        label=name if y == 0 else None)
                if present(low) and present(high):
                    ax.errorbar(value, y + offset, xerr=[[value - low], [high - value]], color="black", capsize=2,
                                lw=1)
            _note(ax, y, f"{t.setting}: {gain_text(t)}" if t.setting else gain_text(t))
        ax.set_yticks(range(len(approaches)), [label(t) for t in approaches], fontsize=8)
        ax.invert_yaxis()
        ax.set_xlim(left=0)
        ax.grid(axis="x", alpha=0.3)
        ax.set_title(group.title, fontsize=8.5, loc="left")
    axes[0, 0].legend(fontsize=7.5, loc="lower left", bbox_to_anchor=(0, 1.12), ncol=2, frameon=False)
    axes[-1, 0].set_xlabel("throughput (samples/s; bars: each median's 95 % interval)")
    fig.suptitle("Each approach as shipped and at its best setting of its own knobs", fontsize=9)
    _save(fig, path)
    return [path]
