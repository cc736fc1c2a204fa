"""Each approach at its best (`bench tune`, `bench run --set`): per approach that ran settings of its own knobs, its
best against its defaults — the gain with its 95 % interval, the knob that made it, the accuracy — whether the
ranking at their best differs from the ranking as shipped, and one figure of each approach both ways.

It reads the verdict's rankings (bench.analysis.verdict: each ranking at their best carries the one as shipped);
the search's short runs live in their own folder (OUT/search) and are never here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from bench.analysis.repeats import Ratio, Runs, ratio
from bench.analysis.verdict import Group, join_words, name_in_group
from bench.metrics import fmt, present
from bench.metrics.blocks import Block, heading, text
from bench.results import ResultStore
from bench.results.frame import records_of
from bench.results.jsonl import SEARCH
from bench.results.key import RunKey, config_key
from bench.spec import knobs
from bench.spec.variants import VARIANTS


@dataclass(frozen=True)
class Tuning:
    """One approach of a ranking at their best: its line as shipped and at its best."""
    shipped: dict | None   # its defaults' line (None: never run as shipped here)
    best: dict             # its best line (the shipped one where no setting beat it)
    gain: Ratio | None     # best over shipped; None where the defaults are its best or a side was not measured
    settings: int          # the configurations measured: its defaults and each setting of its knobs

    @property
    def setting(self) -> str:
        return self.best["key"].knobs

    @property
    def declared(self) -> tuple:
        variant = VARIANTS.get(self.best["variant"])
        return knobs.settable(variant.knobs if variant else None)

    @property
    def knobs_changed(self) -> list[str]:
        """The knobs its best setting sets: the one-at-a-time search's best moved one knob from its default."""
        return list(knobs.chosen(self.declared, self.setting))

    @property
    def changes_arithmetic(self) -> list[str]:
        return knobs.changing_arithmetic(self.declared, self.setting)


def tunings(group: Group, configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> list[Tuning]:
    """The approaches of one ranking at their best, in its order (fastest first)."""
    by_key = {r["key"]: r for r in records_of(configs)}
    counts = pd.Series([k.shipped for k in configs["key"]]).value_counts().to_dict()
    out = []
    for best in [group.winner, *(c.other for c in group.comparisons)]:
        base = best["key"].shipped
        shipped = by_key.get(base)
        gain = (ratio(measured[best["key"]], measured[base])
                if best["key"].knobs and base in measured and best["key"] in measured else None)
        out.append(Tuning(shipped, best, gain, counts.get(base, 1)))
    return out


def ranking_change(group: Group) -> str:
    """Whether the approaches at their best rank as they do shipped, in one sentence."""
    shipped = group.as_shipped
    if shipped is None or shipped.winner is None or group.winner is None:
        return ""
    leader, first = group.winner["key"].shipped, shipped.winner["key"].shipped
    order = [r["key"].shipped for r in (group.winner, *(c.other for c in group.comparisons))]
    before = [r["key"].shipped for r in (shipped.winner, *(c.other for c in shipped.comparisons))]
    moved = [k.series for k in order if k in before and order.index(k) != before.index(k)]
    if leader != first:
        moved = [m for m in moved if m not in (leader.series, first.series)]
        return (f"The ranking changes: as shipped {first.series} leads; at their best {name_in_group(group.winner)} "
                f"does ({group.winner['throughput']:,.0f} against {shipped.winner['throughput']:,.0f} samples/s)"
                + (f"; {join_words(moved)} change places." if moved else "."))
    if not moved:
        return f"The ranking is unchanged: {first.series} leads as shipped and at their best."
    return f"{first.series} leads both ways; {join_words(moved)} change places at their best."


def gain_text(t: Tuning) -> str:
    if not t.setting:
        return "its defaults are its best"
    if t.gain is None:
        return "-"
    word = "tie" if t.gain.tie else ("faster" if t.gain.value > 1 else "slower")
    return f"{t.gain.value:.2f}x [{t.gain.low:.2f}, {t.gain.high:.2f}] ({word})"


def table(found: list[Tuning]) -> pd.DataFrame:
    body = [[label(t), t.setting or "(defaults)",
             fmt(t.shipped["throughput"], ",.0f") if t.shipped is not None and t.shipped["ok"] else "-",
             fmt(t.best["throughput"], ",.0f"), gain_text(t),
             ", ".join(t.knobs_changed) + (" (changes the arithmetic)" if t.changes_arithmetic else "") or "-",
             _accuracy(t), str(t.settings)] for t in found]
    return pd.DataFrame(body, columns=["approach", "best setting", "as shipped (samples/s)", "at its best",
                                       "gain [95% CI]", "knob that mattered", "test acc. (shipped, best)",
                                       "settings measured"])


def _accuracy(t: Tuning) -> str:
    values = [r.get("test_accuracy") for r in (t.shipped, t.best) if r is not None]
    return ", ".join(f"{100 * v:.1f} %" if present(v) else "-" for v in values)


def entries(groups: list[Group], configs: pd.DataFrame,
            measured: dict[RunKey, Runs]) -> list[tuple[Group, list[Tuning]]]:
    """Each ranking at their best (the verdict's groups that carry a ranking as shipped) with its approaches."""
    return [(g, tunings(g, configs, measured)) for g in groups if g.as_shipped is not None and g.winner is not None]


def section(found: list[tuple[Group, list[Tuning]]]) -> list[Block]:
    """The report's section on the rankings at their best, after the verdict; [] where no knob was set."""
    if not found:
        return []
    blocks = [heading("Each approach at its best", 3), text(
        "Each approach's own knobs (`bench list`), set by `bench tune` or `bench run --set`: its best measured "
        "setting against its defaults, the ratio of their throughputs with its 95 % interval, and the knob that "
        "made the difference (the search moves one knob at a time from the defaults). A setting that changes the "
        "arithmetic is named, its accuracy beside the shipped one's. The tuning's short search runs are kept in "
        "its `search/` folder and never ranked.")]
    for group, approaches in found:
        notes = [ranking_change(group)] + [
            f"{t.best['variant']}'s best setting {t.setting} changes the arithmetic: test accuracy "
            f"{_accuracy(t)} (shipped, best) against the task's target {fmt(t.best.get('target_accuracy'), '.1%')}"
            for t in approaches if t.changes_arithmetic]
        blocks += [heading(group.title, 4), Block("table", table(approaches)),
                   Block("bullets", [n for n in notes if n])]
    return blocks


def label(t: Tuning) -> str:
    """The approach as the table and the figure name it: its series as shipped."""
    return name_in_group(t.shipped) if t.shipped is not None else t.best["key"].shipped.series



def search_section(directory: Path, configs: pd.DataFrame) -> list[Block]:
    """A tuning whose confirmation holds no setting of a knob (each approach's defaults won its race, so only they
    were confirmed): what it raced, from its short runs in OUT/search, as context (they are never ranked)."""
    if not len(configs) or not (directory / SEARCH / "results.jsonl").exists() or any(k.knobs for k in configs["key"]):
        return []
    raced: dict[str, dict[str, float | None]] = {}  # approach -> setting -> its best short run (None: none finished)
    for row in ResultStore(directory / SEARCH).dicts():
        key = config_key(row)
        settings = raced.setdefault(key.shipped.series, {})
        median = (row.get("throughput") or {}).get("median") if row.get("status") == "ok" else None
        if median is not None:
            settings[key.knobs] = max(median, settings.get(key.knobs) or 0.0)
        else:
            settings.setdefault(key.knobs, None)
    lines = []
    for approach, settings in raced.items():
        others = {k: v for k, v in settings.items() if k}
        best = max(others, key=lambda k: others[k] or 0.0) if others else None
        lines.append({"approach": approach, "settings raced": len(settings),
                      "did not finish": sum(v is None for v in settings.values()),
                      "defaults (short run, samples/s)": fmt(settings.get(""), ",.0f"),
                      "best other setting (short run)": f"{best} ({fmt(others[best], ',.0f')})" if best else "-"})
    return [heading("Each approach at its best", 3), text(
        f"`bench tune` raced these settings in short runs (`{SEARCH}/`, never ranked), and in every approach its "
        "defaults won the race, so the confirmation ran the defaults only: each approach as shipped is its best "
        "measured here, and the ranking above is both. A short run is three timed windows: a setting it placed "
        "below the defaults may still win at full length, which only a longer budget would tell."),
        Block("table", pd.DataFrame(lines))]
