"""The verdict's headline: per group of comparable runs, at most three short lines a person reads in ten seconds -
what to use, what ties with it, the others in bands of how much slower, and what this machine is too noisy to
separate. The full comparisons, accuracies and the noise account stay in the verdict below it (bench.analysis.verdict)."""
from __future__ import annotations

import pandas as pd

from bench.analysis.repeats import Runs
from bench.analysis.verdict import Comparison, Group, accuracy_agrees, groups, join_words, name_in_group
from bench.results.key import RunKey

# A band of "x-y times slower" spans at most this factor: its slowest is less than 1.3 times its closest's ratio.
BAND_WIDTH = 1.3


def headlines(configs: pd.DataFrame, measured: dict[RunKey, Runs]) -> list[tuple[str, list[str]]]:
    """(group title, its lines) for every group the verdict compares (`measured`: repeats.measured_runs)."""
    return [(g.title, lines(g)) for g in groups(configs, measured)]


def text(headline: list[tuple[str, list[str]]]) -> list[str]:
    """For the console: the title before the first line, the others indented under it."""
    return [line for title, found in headline for line in (f"{title}: {found[0]}", *(f"  {x}" for x in found[1:]))]


def lines(group: Group) -> list[str]:
    """At most three lines after the group's title: the answer, the slower ones in bands, the ones too noisy to
    separate."""
    unfit = ", ".join(name_in_group(r) for r in group.unfit)
    if group.winner is None:
        return [f"none fits in {group.budget}: {unfit}." if unfit and not group.failed
                else "no synchronous run finished."]
    w, leader = group.winner, name_in_group(group.winner)
    answer = (f"use {leader} ({_rate(w['throughput'])} samples/s)" if not group.noisy else
              f"{leader} leads ({_rate(w['throughput'])} samples/s), but this machine cannot separate it from "
              f"{len(group.noisy)} other{'s' if len(group.noisy) > 1 else ''}")
    if group.ties:
        answer += f"; as fast within the intervals: {join_words([name_in_group(c.other) for c in group.ties])}"
    lower = [c.other for c in group.comparisons if accuracy_agrees(w, c.other) is False
             and c.other["test_accuracy"] > w["test_accuracy"]]
    if lower:
        answer += f" (its test accuracy is below {join_words([name_in_group(r) for r in lower])}'s: check it)"
    if unfit:
        answer += f"; does not fit in {group.budget}: {unfit}"
    out = [answer + "."]
    if group.beaten:
        out.append("; ".join(f"{_band(band)} slower: {', '.join(name_in_group(c.other) for c in band)}"
                             for band in bands(group.beaten)) + ".")
    if group.noisy:
        out.append(f"Too noisy here to separate from {leader}: {', '.join(name_in_group(c.other) for c in group.noisy)}.")
    return out


def bands(beaten: list[Comparison]) -> list[list[Comparison]]:
    """The beaten approaches from the closest, a new band where one is BAND_WIDTH times its band's first."""
    ordered = sorted(beaten, key=lambda c: c.ratio.value)
    out = [[ordered[0]]]
    for current in ordered[1:]:
        if current.ratio.value >= BAND_WIDTH * out[-1][0].ratio.value:
            out.append([])
        out[-1].append(current)
    return out


def _band(band: list[Comparison]) -> str:
    low, high = _times(band[0].ratio.value), _times(band[-1].ratio.value)
    return f"{low}x" if low == high else f"{low}-{high}x"


def _times(ratio: float) -> str:
    """A ratio to the digit that shows it: 1.03, not 1.0, for an approach that is measurably slower."""
    return f"{ratio:.2f}" if ratio < 1.095 else f"{ratio:.1f}"


def _rate(samples_per_s: float) -> str:
    return f"{samples_per_s / 1000:.1f}k" if samples_per_s >= 10_000 else f"{samples_per_s:,.0f}"
