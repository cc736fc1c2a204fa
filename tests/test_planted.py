"""`bench tune` on planted effects (tests/planted_framework.py): a knob that adds 20 % of each step, one that takes
20 % off and one that does nothing. Paired by turns, the tuner must pick the saving, find the cost below 1 and never
pick the null, within its budget. The suite's other worker trains beside it, so the effects planted here are larger
than the 5 % the issue asks the tuner to find; those rates, over repeated tunings paired and unpaired, are measured
in results/tune-planted-cpu."""
from __future__ import annotations

import re

import pytest

from helpers import bench, rows

PLANTED = {"DTBENCH_PLUGINS": "tests.planted_framework", "DTBENCH_PLANTED_SHARE": "0.2"}
# Windows of 150 steps (a few tenths of a second each): shorter ones are all noise on a shared 2-vCPU machine.
TASK = ("--task", "quick", "--window-steps", "150", "--steps-per-epoch", "760", "--epochs", "1")


def tuned(out, pairing: str, budget_min: float = 5) -> str:
    """One tuning's line for the planted approach."""
    result = bench("tune", "--variants", "numpy-planted", "--devices", "1", *TASK, "--budget", str(budget_min),
                   "--repeats", "1", "--pairing", pairing, "--out", str(out), env=PLANTED,
                   timeout=60 * budget_min + 300)
    assert result.returncode == 0, result.stderr[-2000:]
    [line] = [line for line in result.stdout.splitlines() if "numpy-planted: best" in line]
    return line


def picked(line: str) -> str:
    return re.search(r"best (\S+(?: defaults)?)", line).group(1)


@pytest.mark.slow
def test_paired_by_turns_the_tuner_picks_the_planted_saving_finds_the_cost_and_never_the_null(out):
    line = tuned(out, "turns")
    assert picked(line) == "save=0.2", line
    assert "costs: cost=0.2" in line, line
    assert all(row["status"] == "ok" for row in rows(out / "search"))
