"""The smallest change a runner can see, per metric, two ways:

- **A/B** (`bench regress --against`, from `regress --calibrate`'s null duets: the tree against itself): the spread
  of a duet's log ratio σ gives the smallest slowdown that `duets` duets catch 80 % of the time with the one-sided
  t-test at `alpha`: (t[1-alpha] + t[0.8]) σ / √duets, with duets - 1 degrees of freedom. The gate calls nothing
  below its threshold a regression, so what it can flag is the larger of the two.
- **History**: the spread of the commits' log figures about their segment's median (robust: 1.4826 × MAD) gives
  the smallest step that the change-point test (two-sided Welch at max_pvalue) finds 80 % of the time with
  `commits` commits on each side: (t[1-p/2] + t[0.8]) σ √(2 / commits), 2 commits - 2 degrees of freedom.

Both are stated as a fraction of the figure (a step of 0.05 is 5 %); a figure that repeats exactly (accuracy, with
one seed) has σ 0, and any change of it is seen."""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from bench.history import detect
from bench.history.series import ALL_METRICS, Series
from bench.regress.compare import duet_log_ratio, load, machine_label
from bench.spec.task import SpecError
from bench.status import Status

POWER = 0.8
COMMITS_EACH_SIDE = 5


@dataclass(frozen=True)
class Floor:
    machine: str
    config: str         # the configuration measured (a calibration's runs, or the series')
    metric: str
    how: str            # "A/B, 5 duets" | "history, 5 commits each side"
    sigma: float        # of one duet's (or one commit's) log figure
    samples: int        # the duets or commits sigma came from
    smallest: float     # the smallest change seen 80 % of the time, as a fraction


def describe(fl: "Floor") -> str:
    return "any change (it repeats exactly)" if fl.sigma == 0 else f"{fl.smallest:.1%}"


def as_fraction(log_step: float) -> float:
    return 1 - math.exp(-log_step)  # a slowdown: the figure falls to exp(-step) of itself


def duet_floor(sigma: float, duets: int, alpha: float) -> float:
    df = duets - 1
    return as_fraction((stats.t.ppf(1 - alpha, df) + stats.t.ppf(POWER, df)) * sigma / math.sqrt(duets))


def history_floor(sigma: float, commits: int, max_pvalue: float) -> float:
    df = 2 * commits - 2
    return as_fraction((stats.t.ppf(1 - max_pvalue / 2, df) + stats.t.ppf(POWER, df)) * sigma
                       * math.sqrt(2 / commits))


def from_calibration(folder: Path, duets: int, alpha: float) -> list[Floor]:
    """The A/B floor per metric from a `regress --calibrate` folder (its a/ and b/ rows took turns pairwise)."""
    a, b = load(folder / "a"), load(folder / "b")
    pairs = [(x, y) for x, y in zip(a, b) if x.status == y.status == Status.OK]
    if len(pairs) < 3:
        raise SpecError(f"{folder}: fewer than 3 finished duets in a/ and b/: point --calibration at a folder "
                        "`bench regress --calibrate --out` wrote")
    machine, config = machine_label([x for x, _ in pairs]), pairs[0][0].key.label
    floors = []
    for metric in ALL_METRICS.values():
        logs = [v for v in (duet_log_ratio(metric, x, y) for x, y in pairs) if v is not None]
        if len(logs) >= 3:
            sigma = statistics.stdev(logs)
            floors.append(Floor(machine, config, metric.name, f"A/B, {duets} duets", sigma, len(logs),
                                duet_floor(sigma, duets, alpha)))
    return floors


def from_history(series: Series, changes: list[detect.ChangePoint], max_pvalue: float,
                 commits: int = COMMITS_EACH_SIDE) -> Floor | None:
    values = [p.value for p in series.points]
    if len(values) < 3:
        return None
    residuals = detect.segment_residuals(values, changes)
    sigma = float(1.4826 * np.median(np.abs(residuals - np.median(residuals))))
    return Floor(series.machine, series.config, series.metric.name, f"history, {commits} commits each side", sigma, len(values),
                 history_floor(sigma, commits, max_pvalue))
