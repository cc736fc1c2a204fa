"""How the plots tell series apart: one colour per approach, its synthetic-input twin and no-sync bound in the
same hue, lighter and dashed or dotted; the legend outside the data."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only: no display on benchmark machines
from matplotlib import colors as mcolors  # noqa: E402

from bench.spec.variants import VARIANTS  # noqa: E402

# tab10 then the dark halves of tab20b/tab20c: 20 hues that stay apart on white.
PALETTE = [*matplotlib.colormaps["tab10"].colors, *matplotlib.colormaps["tab20b"].colors[::4],
           *matplotlib.colormaps["tab20c"].colors[::4][:3], (0.3, 0.3, 0.3), (0.55, 0.35, 0.0)]
ORDER = {name: i for i, name in enumerate(VARIANTS)}


def base(r: dict) -> str:
    """The approach a line belongs to: its series with 'no sync' and 'synthetic' taken off."""
    key = r["key"]
    if key.independent or key.input == "synthetic":
        key = key._replace(independent=False, input="memory" if key.input == "synthetic" else key.input)
    return key.series + (f" ({r['nodes']} nodes)" if r["nodes"] > 1 else "")


def twin(r: dict) -> str | None:
    """'no sync', 'synthetic' or None (the real run)."""
    return "no sync" if r["key"].independent else "synthetic" if r["key"].input == "synthetic" else None


def approach(r: dict) -> str:
    """Its base less the model and the memory budget, which a panel's title names: one approach, one colour across
    the models of a sweep."""
    return base({"key": r["key"]._replace(model="", device_memory=0.0), "nodes": r["nodes"]})


def colours(rows: list[dict], name=base) -> dict[str, tuple]:
    """A colour per approach (`name`: how a row names it), in the variants table's order so that an approach keeps
    its colour across plots."""
    names = sorted({name(r) for r in rows}, key=lambda b: (ORDER.get(b.split(" ")[0], len(ORDER)), b))
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(names)}


def lighter(colour, amount: float = 0.5) -> tuple:
    """The colour mixed with white."""
    r, g, b = mcolors.to_rgb(colour)
    return (r + (1 - r) * amount, g + (1 - g) * amount, b + (1 - b) * amount)


def line_style(r: dict, palette: dict) -> dict:
    """matplotlib keywords for a line of this configuration's series."""
    colour = palette[base(r)]
    kind = twin(r)
    if kind is None:
        return {"color": colour, "ls": "-", "marker": "o", "lw": 1.8}
    return {"color": lighter(colour, 0.35), "ls": "--" if kind == "no sync" else ":", "lw": 1.4,
            "marker": "^" if kind == "no sync" else "s", "mfc": "white"}


def bar_style(r: dict, palette: dict) -> dict:
    colour = palette[base(r)]
    kind = twin(r)
    if kind is None:
        return {"color": colour, "edgecolor": colour}
    return {"color": lighter(colour, 0.6), "edgecolor": colour, "hatch": "//" if kind == "no sync" else ".."}


LEGEND_LINE_IN = 0.19  # one 8-point legend entry, in inches
BAR_IN = 0.28  # the width a labelled bar needs, in inches


def bar_labels(ax, labels: list[str]) -> None:
    """One-line labels rotated to end under their bars (or group of bars), and the figure wide enough for every
    panel's labels: a sweep's 40-odd labels would otherwise be printed over each other."""
    figure = ax.figure
    wide = len(figure.axes) * (BAR_IN * len(labels) + 1.5)
    figure.set_figwidth(max(figure.get_figwidth(), wide))
    ax.set_xticks(range(len(labels)), labels, rotation=50, ha="right", rotation_mode="anchor", fontsize=7)


def legend_outside(ax, **kwargs) -> None:
    """The legend right of the axes, where it covers no data (savefig keeps it in the frame)."""
    entries = len(ax.get_legend_handles_labels()[0])
    if entries:
        # The figure grows to hold its legend (a sweep draws 30-odd series): a legend taller than the axes would
        # leave the saved figure's data a strip beside it.
        figure = ax.figure
        figure.set_figheight(max(figure.get_figheight(), 0.8 + LEGEND_LINE_IN * entries))
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False, **kwargs)
