"""The statistics of a run's windows: median, its order-statistic interval, step time (numpy)."""
from __future__ import annotations

import math

import numpy as np


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval for the median from order statistics.

    Returns (low, high, coverage). The interval [x(j), x(n-j+1)] covers the median with probability
    1 - 2 P(Binomial(n, 1/2) <= j-1); we take the narrowest one that reaches `level`. Timing windows
    are skewed (a stalled window is long, never short), so this beats mean +- 1.96 sd. With fewer
    than 6 windows no such interval reaches 95 %: we return min..max and the coverage actually achieved.
    """
    if not values:
        raise ValueError("no values")
    xs = np.sort(np.asarray(values, dtype=float))
    n = len(xs)
    if n == 1:
        return float(xs[0]), float(xs[0]), 0.0
    j = np.arange(1, n // 2 + 1)
    coverage = 1 - 2 * _half_binomial_cdf(j - 1, n)  # falls as j (the interval's inset) grows
    reaching = j[coverage >= level]
    best = int(reaching[-1]) if len(reaching) else 1
    return float(xs[best - 1]), float(xs[n - best]), float(coverage[best - 1])


def _half_binomial_cdf(ks: np.ndarray, n: int) -> np.ndarray:
    """P(Binomial(n, 1/2) <= k) for each k, exactly (integer counts): scipy.stats gives the same figures but takes
    1.7 s of CPU to import, paid by every run's harness for a sum of n // 2 binomial coefficients."""
    below = np.cumsum([math.comb(n, i) for i in range(n + 1)], dtype=object)
    return np.array([below[k] / 2**n for k in ks], dtype=float)


def throughput_summary(window_seconds: list[float], samples_per_window: int) -> dict:
    """Per-window throughput (samples/s) -> median, 95 % interval, raw."""
    rates = [samples_per_window / s for s in window_seconds]
    low, high, coverage = median_interval(rates)
    return {"median": float(np.median(rates)), "ci_low": low, "ci_high": high,
            "ci_coverage": round(coverage, 4), "windows": rates}


def paired_ratio(real_seconds: list[float], resident_seconds: list[float]) -> dict:
    """The input phases' pairs (a timed window, then the same steps on resident batches) -> real over resident
    throughput per pair, its median and 95 % interval: the input's cost is 1 - that ratio. Pairs a window apart
    see the same machine, so the ratio's interval is the effect's, not two runs' drift."""
    ratios = [resident / real for real, resident in zip(real_seconds, resident_seconds)]
    low, high, coverage = median_interval(ratios)
    return {"real_over_resident": float(np.median(ratios)), "ci_low": low, "ci_high": high,
            "ci_coverage": round(coverage, 4), "pairs": ratios}


def exposed_communication(resident_seconds: list[float], unsynced_seconds: list[float | None]) -> dict | None:
    """The input phases on several ranks: each resident window against the same batches trained with gradient
    synchronisation off just before it -> 1 - unsynced / synchronised time per pair (the share of the step that
    waits on communication), its median and 95 % interval. None where no pair has both."""
    costs = [1 - unsynced / synced for synced, unsynced in zip(resident_seconds, unsynced_seconds) if unsynced]
    if not costs:
        return None
    low, high, coverage = median_interval(costs)
    return {"cost": float(np.median(costs)), "ci_low": low, "ci_high": high, "ci_coverage": round(coverage, 4),
            "pairs": costs}


def step_time_ms(window_seconds: list[float], window_steps: int) -> dict:
    per_step = [1000 * s / window_steps for s in window_seconds]
    return {"median": float(np.median(per_step)), "p90": float(np.percentile(per_step, 90))}
