"""Racing an approach's settings within a time budget, the arithmetic alone (what `bench tune` will run): every
setting still in the race gets one more short run a round, and a setting is dropped once its interval lies wholly
below its approach's leader's, in the manner of successive halving but by evidence rather than by a fixed half.
The budget keeps back what the confirmation costs: each approach's best and its default, full length, interleaved,
`repeats` times each.
"""
from __future__ import annotations

import math
import statistics
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


# The race by turns (bench.sweep.duet): each setting against its approach's defaults, one duet a round, judged on
# the duets' log ratios (the paired windows' median each) as `bench regress` judges a duet's.
MIN_DUETS = 3    # fewer leave the t interval wider than any effect worth a knob
GAIN = 0.05      # the smallest gain worth a knob: a setting whose interval lies within +-GAIN of 1 is out


def paired_interval(logs: list[float], level: float = 0.95) -> tuple[float, float]:
    """The mean log ratio's Student t interval over the duets (the spread left between processes)."""
    from scipy import stats

    mean = statistics.mean(logs)
    half = stats.t.ppf(0.5 + level / 2, len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return mean - half, mean + half


GAINS, COSTS, NULL, OPEN = "gains", "costs", "no gain worth it", "undecided"


def decision(logs: list[float], gain: float = GAIN) -> str:
    """A setting's standing from its duets with the defaults: GAINS (its interval wholly above 1), COSTS (wholly
    below), NULL (wholly within +-gain of 1), else OPEN: it straddles 1 and may still gain `gain`, so the next
    round gives it another duet."""
    if len(logs) < MIN_DUETS:
        return OPEN
    low, high = paired_interval(logs)
    if low > 0:
        return GAINS
    if high < 0:
        return COSTS
    if math.log(1 - gain) < low and high < math.log(1 + gain):
        return NULL
    return OPEN


def pick(logs: dict[str, list[float]]) -> str:
    """The setting whose gain is surest to be one with the highest mean ratio; "" (the defaults) where none
    gains."""
    gaining = {knobs: statistics.mean(v) for knobs, v in logs.items() if decision(v) == GAINS}
    return max(gaining, key=gaining.get) if gaining else ""
