"""The aggregation maths: medians, intervals, efficiency. Standard library only."""
from __future__ import annotations

import math
import statistics


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Distribution-free confidence interval for the median from order statistics.

    Returns (low, high, coverage). The interval [x(j), x(n-j+1)] covers the
    median with probability 1 - 2 P(Binomial(n, 1/2) <= j-1); we take the
    narrowest one that reaches `level`. Timing windows are skewed (a stalled
    window is long, never short), so this beats mean +- 1.96 sd. With fewer
    than 6 windows no such interval reaches 95 %: we return min..max and the
    coverage actually achieved.
    """
    if not values:
        raise ValueError("no values")
    xs = sorted(values)
    n = len(xs)
    best_j, coverage = 1, 1 - 2 * 0.5 ** n
    for j in range(1, n // 2 + 1):
        cov = 1 - 2 * sum(math.comb(n, i) for i in range(j)) / 2 ** n
        if cov >= level:
            best_j, coverage = j, cov
        else:
            break
    return xs[best_j - 1], xs[n - best_j], coverage


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def throughput_summary(window_seconds: list[float], samples_per_window: int) -> dict:
    """Per-window throughput (samples/s) -> median, 95 % interval, raw; step time median/p90."""
    rates = [samples_per_window / s for s in window_seconds]
    low, high, coverage = median_interval(rates)
    return {"median": statistics.median(rates), "ci_low": low, "ci_high": high,
            "ci_coverage": round(coverage, 4), "windows": rates}


def step_time_ms(window_seconds: list[float], window_steps: int) -> dict:
    per_step = [1000 * s / window_steps for s in window_seconds]
    return {"median": statistics.median(per_step), "p90": percentile(per_step, 90)}


def scaling_efficiency(throughput_n: float, devices: int, throughput_1: float | None) -> float | None:
    """throughput(N) / (N x throughput(1)) of the same variant on the same task."""
    if not throughput_1 or devices < 1:
        return None
    return throughput_n / (devices * throughput_1)


def student_t_cdf(t: float, df: int) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (no scipy in the harness).

    With t = sqrt(df) tan(theta) the density integrates as a cos(theta)^(df-1) over a bounded
    interval, smooth enough for Simpson's rule to reach ~1e-12.
    """
    if df < 1:
        raise ValueError("df must be at least 1")
    scale = math.exp(math.lgamma((df + 1) / 2) - math.lgamma(df / 2)) / math.sqrt(math.pi)
    theta, steps = math.atan(abs(t) / math.sqrt(df)), 2000
    h = theta / steps
    weights = (1 if i in (0, steps) else 4 if i % 2 else 2 for i in range(steps + 1))
    area = scale * h / 3 * sum(w * math.cos(i * h) ** (df - 1) for i, w in enumerate(weights))
    return 0.5 + math.copysign(area, t)
