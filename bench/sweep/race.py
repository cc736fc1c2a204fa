"""Racing an approach's settings within a time budget, the arithmetic alone (what `bench tune` will run): every
setting still in the race gets one more short run a round, and a setting is dropped once its interval lies wholly
below its approach's leader's, in the manner of successive halving but by evidence rather than by a fixed half.
The budget keeps back what the confirmation costs: each approach's best and its default, full length, interleaved,
`repeats` times each.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from bench.results.stats import median_interval


@dataclass(frozen=True)
class Entry:
    approach: str   # a variant
    knobs: str      # its settings, as bench.spec.knobs writes them ("": as shipped)


def interval(throughputs: list[float]) -> tuple[float, float]:
    """The median's order-statistic interval over a setting's measured windows (min..max below 6)."""
    low, high, _ = median_interval(throughputs)
    return low, high


def leader(samples: dict[str, list[float]]) -> str:
    """The setting with the highest median throughput (ties: the first named)."""
    return max(samples, key=lambda knobs: sorted(samples[knobs])[len(samples[knobs]) // 2])


def dropped(samples: dict[str, list[float]]) -> set[str]:
    """One approach's settings whose interval lies wholly below its leader's: they are out of the race."""
    if len(samples) < 2:
        return set()
    best = leader(samples)
    floor = interval(samples[best])[0]
    return {knobs for knobs, values in samples.items() if knobs != best and interval(values)[1] < floor}


def confirmation_s(full_runs_s: Iterable[float], repeats: int = 3) -> float:
    """What confirming costs: each approach's best and default, full length, `repeats` times each, at each
    approach's own full-length run's cost."""
    return 2 * repeats * sum(full_runs_s)


def next_round(race: dict[str, dict[str, list[float]]], spent_s: float, budget_s: float, short_run_s: float,
               full_runs_s: dict[str, float], repeats: int = 3) -> list[Entry]:
    """The short runs of the next round: one for every setting still racing in an approach with more than one
    left. [] when the race is over: every approach is down to one setting, or the round would eat into what
    the confirmation needs. `race` holds each approach's settings that are still in, with their throughputs;
    `full_runs_s` each approach's full-length run's cost."""
    entries = [Entry(approach, knobs) for approach, samples in race.items() if len(samples) > 1 for knobs in samples]
    left = budget_s - confirmation_s([full_runs_s[approach] for approach in race], repeats) - spent_s
    return entries if entries and len(entries) * short_run_s <= left else []


def prune(race: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, list[float]]]:
    """The race with every dropped setting taken out."""
    return {approach: {k: v for k, v in samples.items() if k not in dropped(samples)}
            for approach, samples in race.items()}
