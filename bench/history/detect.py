"""Change points in one series, found by a library and kept only where a test says so.

ruptures' PELT (an exact search for the segmentation of least squared error plus a penalty per change) proposes
changes of the mean of the log figures, with the Schwarz (BIC) penalty of a change of mean, 2σ² log n (σ from the
differences of neighbouring commits, which a step barely moves), each level held for at least 3 commits (one odd
commit at either end is no level). Each proposal is then held to a two-sided Welch t-test between the two segments
it separates, the weakest dropped and the rest tested again on the merged segments until every one left has
p ≤ max_pvalue (0.001 by default, as Apache Otava's), the way Otava prunes E-divisive's proposals. The size is the
ratio of the segments' medians; its 95 % interval is Welch's for the difference of the mean logs. Logs, since a
slowdown is a ratio: a 10 % step is the same size on a fast runner and a slow one."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from bench.history import MAX_PVALUE

# Commits on each side of a change. With 2, chance pairs of slow runs at the series' ends were named changes: 8-25 %
# of step-free series drawn from the calibrations' runs (benchmarks/history_validation.py), 2-8 % with 3.
MIN_SEGMENT = 3


@dataclass(frozen=True)
class ChangePoint:
    index: int           # the first point of the new segment
    before: float        # the segments' medians
    after: float
    p_value: float
    low: float           # 95 % interval of the ratio after / before
    high: float

    @property
    def ratio(self) -> float:
        return self.after / self.before


def noise_scale(logs: np.ndarray) -> float:
    """σ of one commit's log figure, from the median absolute difference of neighbours (÷ √2 × 0.6745): a step
    moves one difference of n - 1, so it hardly counts."""
    diffs = np.abs(np.diff(logs))
    return float(np.median(diffs) / (0.6745 * math.sqrt(2))) if len(diffs) else 0.0


def welch(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float]:
    """Two-sided Welch p for a change of mean between a and b, and the 95 % interval of mean(b) - mean(a)."""
    diff = float(b.mean() - a.mean())
    if a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b) == 0:  # identical figures on each side (rounding aside):
        return (0.0 if abs(diff) > 1e-9 else 1.0), diff, diff  # a change is certain, none is impossible
    test = stats.ttest_ind(b, a, equal_var=False)  # as bench.analysis.repeats compares two sets of runs
    interval = test.confidence_interval(0.95)
    return float(test.pvalue), float(interval.low), float(interval.high)


def change_points(values: list[float], max_pvalue: float = MAX_PVALUE) -> list[ChangePoint]:
    """The change points of a series of positive figures in commit order, oldest first."""
    import ruptures

    logs = np.log(np.asarray(values, dtype=float))
    n = len(logs)
    if n < 2 * MIN_SEGMENT:
        return []
    sigma = max(noise_scale(logs) or float(np.std(logs)), 1e-4)  # 0.01 %: figures that repeat exactly
    proposed = ruptures.Pelt(model="l2", min_size=MIN_SEGMENT, jump=1).fit(logs.reshape(-1, 1)).predict(
        pen=2 * sigma ** 2 * math.log(n))[:-1]
    kept = list(proposed)
    while kept:
        bounds = [0, *kept, n]
        tests = [welch(logs[bounds[i]:bounds[i + 1]], logs[bounds[i + 1]:bounds[i + 2]]) for i in range(len(kept))]
        worst = max(range(len(kept)), key=lambda i: tests[i][0])
        if tests[worst][0] <= max_pvalue:
            break
        del kept[worst]
    bounds = [0, *kept, n]
    found = []
    for i, cut in enumerate(kept):
        a, b = np.asarray(values[bounds[i]:cut]), np.asarray(values[cut:bounds[i + 2]])
        p, low, high = welch(np.log(a), np.log(b))
        found.append(ChangePoint(cut, float(np.median(a)), float(np.median(b)), p, math.exp(low), math.exp(high)))
    return found


def segment_residuals(values: list[float], points: list[ChangePoint]) -> np.ndarray:
    """Each log figure less its segment's median: the noise left once the changes are taken out."""
    logs = np.log(np.asarray(values, dtype=float))
    bounds = [0, *(c.index for c in points), len(logs)]
    return np.concatenate([logs[s:e] - np.median(logs[s:e]) for s, e in zip(bounds, bounds[1:])])
