"""history.html: each configuration's metrics over commits, one PNG a configuration (a panel a metric: every run's
figure, the commits' medians, each segment's level, the change points marked with their size, a change of machine
as a grey line; below, the A/B duets' ratio against the commit before where `--against` ran), the change points
and each runner's floor as tables. One file: the PNGs are inlined, and written beside it too."""
from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only: no display on CI runners
import matplotlib.pyplot as plt  # noqa: E402

from bench.history.floor import describe  # noqa: E402

STYLE = ("body{font:15px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:1em 0}td,th{border-bottom:1px solid #ddd;padding:.3em .6em;"
         "text-align:left}th{background:#f4f4f4}tr.regression td{color:#b00020;font-weight:600}"
         "img{max-width:100%;border:1px solid #eee}.lead{font-size:1.1em}")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80]


def plot(config: str, analysis, out: Path) -> Path:
    """One figure for a configuration: a panel for each metric it has, then the duets' panel if any ran."""
    series = [s for s in analysis.history.series if s.config == config]
    metrics = list(dict.fromkeys(s.metric.name for s in series))
    x_of = {c: i for i, c in enumerate(analysis.history.commits)}
    has_duets = any(p.duet_ratio is not None for s in series for p in s.points)
    rows = len(metrics) + has_duets
    fig, axes = plt.subplots(rows, 1, figsize=(11, 2.3 * rows + 0.6), sharex=True, squeeze=False)
    machines = sorted({s.machine for s in series})
    colours = {m: plt.cm.tab10(i % 10) for i, m in enumerate(machines)}
    for ax, metric in zip(axes[:, 0], metrics):
        for s in (s for s in series if s.metric.name == metric):
            xs = [x_of[p.commit] for p in s.points]
            colour = colours[s.machine]
            ax.plot([x for x, p in zip(xs, s.points) for _ in p.values], [v for p in s.points for v in p.values],
                    ".", color=colour, alpha=0.3, ms=4)
            ax.plot(xs, [p.value for p in s.points], "o-", color=colour, lw=0.8, ms=4, label=s.machine)
            changes = analysis.changes[s.name]
            bounds = [0, *(c.index for c in changes), len(s.points)]
            for start, end in zip(bounds, bounds[1:]):  # each segment's level: its median
                level = sorted(p.value for p in s.points[start:end])[(end - start) // 2]
                ax.hlines(level, xs[start] - 0.4, xs[end - 1] + 0.4, color=colour, lw=2, alpha=0.6)
            for c in changes:
                at = (xs[c.index - 1] + xs[c.index]) / 2
                ax.axvline(at, color="#b00020", ls="--", lw=1)
                ax.annotate(f"{(c.ratio - 1) * 100:+.1f} %\np {c.p_value:.0e}", (at, 1),
                            xycoords=("data", "axes fraction"), xytext=(3, -3), textcoords="offset points", va="top",
                            fontsize=8, color="#b00020")
        for first in (min(x_of[p.commit] for p in s.points) for s in series if s.metric.name == metric):
            if first:
                ax.axvline(first - 0.5, color="grey", lw=2, alpha=0.4)  # where a machine's series starts
        unit = next(s.metric.unit for s in series if s.metric.name == metric)
        ax.set_ylabel(f"{metric}\n({unit})" if unit else metric, fontsize=9)
        ax.grid(alpha=0.3)
    if len(machines) > 1:
        axes[0, 0].legend(fontsize=8, loc="lower left")
    if has_duets:
        ax = axes[-1, 0]
        for s in (s for s in series if s.metric.name == "throughput"):
            pts = [p for p in s.points if p.duet_ratio is not None]
            xs = [x_of[p.commit] for p in pts]
            lows = [p.duet_ratio - (p.duet_range or (p.duet_ratio,) * 2)[0] for p in pts]
            highs = [(p.duet_range or (p.duet_ratio,) * 2)[1] - p.duet_ratio for p in pts]
            ax.errorbar(xs, [p.duet_ratio for p in pts], yerr=[lows, highs], fmt="s", color=colours[s.machine],
                        ms=4, capsize=2)
        ax.axhline(1, color="grey", lw=1)
        ax.set_ylabel("A/B throughput\nvs the commit before", fontsize=9)
        ax.grid(alpha=0.3)
    commits = analysis.history.commits
    step = max(1, len(commits) // 30)
    axes[-1, 0].set_xticks(range(0, len(commits), step), [c[:7] for c in commits[::step]], rotation=60,
                           fontsize=7, family="monospace")
    axes[-1, 0].set_xlabel("commit (oldest first)")
    fig.suptitle(config, fontsize=10)
    fig.tight_layout()
    path = out / f"history-{_slug(config)}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _duet_cell(f) -> str:
    if f.duet_ratio is None:
        return "–"
    span = f" ({f.duet_range[0]:.3f}–{f.duet_range[1]:.3f})" if f.duet_range else ""
    return f"×{f.duet_ratio:.3f}{span}"


def _inline_png(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="{escape(path.stem)}" src="data:image/png;base64,{data}"></figure>'


def write(analysis, out: Path, threshold: float) -> Path:
    history = analysis.history
    newest = [f for f in analysis.findings if f.newest and f.verdict == "regression"]
    named = ", ".join(f"{f.config} {f.metric} {(f.ratio - 1) * 100:+.1f} % at {f.commit[:10]}" for f in newest)
    lead = f"REGRESSION: {named}" if newest else "No regression at the newest change point of any series."
    parts = [f"<h1>dtbench history</h1><p class=\"lead\"><strong>{escape(lead)}</strong></p>",
             f"<p>{len(history.commits)} commits ({escape(history.commits[0][:10])} … "
             f"{escape(history.commits[-1][:10])}) read from <code>{escape(str(history.source))}</code>; threshold "
             f"{threshold:.0%}. A change of machine starts a new series (grey line), never a change point.</p>",
             "<h2>Change points</h2>"]
    if analysis.findings:
        parts.append("<table class=\"changes\"><tr><th>configuration</th><th>metric</th><th>machine</th><th>commit"
                     "</th><th>before → after</th><th>change [95 %]</th><th>p</th><th>verdict</th>"
                     "<th>its A/B (duets)</th></tr>" + "".join(
                         f"<tr class=\"{f.verdict}\"><td>{escape(f.config)}</td><td>{f.metric}</td><td>"
                         f"{escape(f.machine)}</td><td><code>{f.commit[:10]}</code></td><td>{f.before:.4g} → "
                         f"{f.after:.4g}</td><td>{(f.ratio - 1) * 100:+.1f} % [{(f.low - 1) * 100:+.1f}, "
                         f"{(f.high - 1) * 100:+.1f}]</td><td>{f.p_value:.2g}</td><td>{f.verdict}"
                         f"{' (newest)' if f.newest else ''}</td><td>{_duet_cell(f)}</td></tr>"
                         for f in analysis.findings) + "</table>")
    else:
        parts.append("<p>None.</p>")
    parts.append("<h2>The smallest change each runner can see</h2><p>Seen 80 % of the time: by an A/B "
                 "(<code>bench regress --against</code>, from <code>--calibrate</code>'s null duets), and by this "
                 "history (its commits' spread about their level, a step with 5 commits on each side). The gate "
                 f"calls nothing under its threshold ({threshold:.0%}) a regression.</p>"
                 "<table class=\"floors\"><tr><th>machine</th><th>configuration</th><th>metric</th><th>by</th>"
                 "<th>sd</th><th>over</th><th>smallest change</th></tr>" + "".join(
                     f"<tr><td>{escape(fl.machine)}</td><td>{escape(fl.config)}</td><td>{fl.metric}</td><td>{fl.how}"
                     f"</td><td>{fl.sigma:.1%}</td><td>{fl.samples}</td><td>{describe(fl)}</td></tr>"
                     for fl in sorted(analysis.floors, key=lambda x: (x.machine, x.config, x.metric, x.how)))
                 + "</table>")
    for config in dict.fromkeys(s.config for s in history.series):
        parts.append(f"<h2>{escape(config)}</h2>" + _inline_png(plot(config, analysis, out)))
    path = out / "history.html"
    path.write_text("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" "
                    f"href=\"data:,\"><title>dtbench history</title><style>{STYLE}</style></head>\n<body><main>\n"
                    + "\n".join(parts) + "\n</main></body></html>\n")
    return path
