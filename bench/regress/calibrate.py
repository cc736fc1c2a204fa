"""The regression check measured on this machine: false alarms over A/A comparisons of one tree
(duets of the tree with itself), and detection of 10 % and 20 % slowdowns injected by scaling the
recorded windows of one side."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from bench import REPO_ROOT
from bench.regress import compare, duets


def calibrate(run_args: list[list[str]], groups: int, repeats: int, threshold: float, alpha: float,
              out: Path) -> dict:
    tree = (sys.executable, REPO_ROOT)
    duets.duets({"a": tree, "b": tree}, run_args, groups * repeats, out)
    sides = compare.load(out / "a"), compare.load(out / "b")
    summary = {"comparisons": groups, "duets_per_comparison": repeats, "threshold": threshold,
               "alpha": alpha, "injection": "recorded windows of side b scaled by (1 - slowdown)"}
    for name, slowdown in (("false_alarm_rate", 0.0), ("detected_10pct", 0.10), ("detected_20pct", 0.20)):
        hits = 0
        for a, b in duets.split_groups(*sides, groups, repeats):
            code, _ = compare.compare(a, compare.slowed(b, slowdown), threshold, alpha, duets=True)
            hits += code == compare.REGRESSION
        summary[name] = hits / groups
    summary.update(compare.noise(*sides))
    (out / "calibration.json").write_text(json.dumps(summary, indent=1))
    return summary
