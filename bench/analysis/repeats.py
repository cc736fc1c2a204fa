"""Statistics across a configuration's runs: its run-to-run spread against its windows, and the throughput
ratio of two configurations with a 95 % interval (scipy).

The ratio's interval comes from
- the run medians when both configurations ran at least twice: Welch's t-interval on the difference of the
  mean log run medians (`scipy.stats.ttest_ind(equal_var=False).confidence_interval`), exponentiated, so a
  ratio of geometric means. Run medians, because on a shared machine throughput drifts between runs far more
  than between the windows of one run;
- else the windows: a percentile bootstrap (`scipy.stats.bootstrap`, 2,000 resamples, fixed seed) of the ratio
  of the window medians, each configuration's windows pooled over its runs. It cannot see run-to-run drift.

A configuration's runs disagree when their 95 % window intervals do not all overlap (one run's interval starts
above where another's ends): its run-to-run spread is beyond what its windows allow.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from bench.results.key import RunKey
from bench.status import Status

LEVEL = 0.95


@dataclass(frozen=True)
class Runs:
    """One configuration's ok runs as measured: each run's median and window interval, every window pooled."""
    medians: tuple[float, ...]
    lows: tuple[float, ...]
    highs: tuple[float, ...]
    windows: tuple[float, ...]

    @property
    def count(self) -> int:
        return len(self.medians)

    @property
    def max_over_min(self) -> float | None:
        return max(self.medians) / min(self.medians) if self.count > 1 else None

    @property
    def cv(self) -> float | None:
        """Coefficient of variation of the run medians (sample standard deviation / mean)."""
        return float(np.std(self.medians, ddof=1) / np.mean(self.medians)) if self.count > 1 else None

    @property
    def window_halfwidth(self) -> float | None:
        """How far a run's 95 % window interval reaches either side of its median, relative (median over runs)."""
        widths = [(h - lo) / 2 / m for m, lo, h in zip(self.medians, self.lows, self.highs)
                  if not (np.isnan(lo) or np.isnan(h))]
        return float(np.median(widths)) if widths else None

    @property
    def disagree(self) -> bool:
        """The run-to-run spread exceeds the windows: the runs' intervals do not all overlap."""
        return self.count > 1 and not np.isnan(self.lows).any() and max(self.lows) > min(self.highs)


def measured_runs(runs: pd.DataFrame) -> dict[RunKey, Runs]:
    """Each run key's ok runs, from the run frame (`bench.results.frame.frame`)."""
    if runs.empty or "throughput.median" not in runs:
        return {}
    ok = runs[(runs["status"] == Status.OK) & runs["throughput.median"].notna()]
    windows = ok["throughput.windows"] if "throughput.windows" in ok else pd.Series([None] * len(ok), index=ok.index)
    out = {}
    for key, group in ok.groupby("key", sort=False):
        pooled = [w for ws in windows[group.index] if isinstance(ws, list) for w in ws]
        out[key] = Runs(tuple(group["throughput.median"]), tuple(group.get("throughput.ci_low", np.nan)),
                        tuple(group.get("throughput.ci_high", np.nan)), tuple(pooled))
    return out


@dataclass(frozen=True)
class Ratio:
    value: float
    low: float
    high: float
    from_runs: bool  # the interval is from the run medians (else from the windows)

    @property
    def tie(self) -> bool:
        return self.low <= 1 <= self.high


def ratio(a: Runs, b: Runs) -> Ratio:
    """a's throughput over b's with its 95 % interval (see the module's docstring for the method)."""
    from scipy import stats  # here: 1.7 s of CPU to import, and a run's own table compares no configurations

    if a.count > 1 and b.count > 1:
        test = stats.ttest_ind(np.log(a.medians), np.log(b.medians), equal_var=False)
        low, high = test.confidence_interval(LEVEL)
        if np.isfinite(low) and np.isfinite(high):  # identical run medians on both sides leave no variance
            centre = np.mean(np.log(a.medians)) - np.mean(np.log(b.medians))
            return Ratio(float(np.exp(centre)), float(np.exp(low)), float(np.exp(high)), True)
    if len(a.windows) > 1 and len(b.windows) > 1:
        boot = stats.bootstrap((np.array(a.windows), np.array(b.windows)), _median_ratio, vectorized=True,
                               paired=False, n_resamples=2000, confidence_level=LEVEL, method="percentile",
                               rng=np.random.default_rng(0))
        value = float(np.median(a.windows) / np.median(b.windows))
        return Ratio(value, float(boot.confidence_interval.low), float(boot.confidence_interval.high), False)
    # No windows stored (older rows): the widest ratio the two median intervals allow.
    med_a, med_b = float(np.median(a.medians)), float(np.median(b.medians))
    return Ratio(med_a / med_b, min(a.lows) / max(b.highs), max(a.highs) / min(b.lows), False)


def _median_ratio(x, y, axis=-1):
    return np.median(x, axis=axis) / np.median(y, axis=axis)
