"""`bench history`'s detector on synthetic series whose noise is a real runner's (issue 73, item 4): each commit's
figure is the median of 5 runs drawn from a `bench regress --calibrate` folder's runs (the same tree run again and
again on that machine), a step of 0-20 % planted at a known commit. Per step size: how often the step is found at
its commit (within one), how often a change point is named where there is none, and how often the gate would exit
1; the same series through Apache Otava's detector with its defaults, for comparison.

    python benchmarks/history_validation.py --out results/history-cpu/synthetic [--otava /tmp/otava/whl]

--otava: a folder holding the `otava` package (`pip download --no-deps apache-otava==0.8.0`, unzipped: its
analysis module needs only numpy and scipy); without it Otava's columns are left out. Otava is never installed or
committed here: its package pins numpy 2.2 and scipy < 1.17."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from bench import REPO_ROOT
from bench.history import MAX_PVALUE, detect, floor
from bench.regress.compare import load, machine_label
from bench.status import Status

RUNNERS = {"cpu2": REPO_ROOT / "results" / "regress-calibration-cpu2",
           "h100": REPO_ROOT / "results" / "regress-calibration-h100" / "call2"}
STEPS = (0.0, 0.02, 0.05, 0.10, 0.15, 0.20)
COMMITS, RUNS_A_COMMIT, TRIALS, THRESHOLD = 30, 5, 200, 0.05


def pool(folder: Path) -> tuple[np.ndarray, str]:
    rows = [r for r in load(folder / "a") + load(folder / "b") if r.status == Status.OK and r.throughput]
    return np.array([r.throughput["median"] for r in rows]), machine_label(rows)


def synthetic(runs: np.ndarray, step: float, rng: np.random.Generator) -> tuple[list[float], int]:
    at = int(rng.integers(10, COMMITS - 9))  # 10 or more commits on each side
    values = [float(np.median(rng.choice(runs, RUNS_A_COMMIT, replace=False))) * (1 - step if i >= at else 1)
              for i in range(COMMITS)]
    return values, at


def score(found: list[tuple[int, float]], at: int, step: float) -> tuple[bool, int]:
    """(the step found at its commit, within one, in its direction; change points named elsewhere)."""
    hit = [i for i, ratio in found if abs(i - at) <= 1 and step > 0 and ratio < 1]
    return bool(hit), len(found) - len(hit[:1])


def ours(values: list[float]) -> tuple[list[tuple[int, float]], bool]:
    changes = detect.change_points(values, MAX_PVALUE)
    gate = bool(changes) and changes[-1].ratio < 1 - THRESHOLD  # bench history's exit 1 on throughput
    return [(c.index, c.ratio) for c in changes], gate


def otava(values: list[float]) -> list[tuple[int, float]]:
    from otava.analysis import compute_change_points  # defaults: window_len 50, max_pvalue 0.001

    cps, _ = compute_change_points(values)
    return [(int(c.index), float(np.median(values[c.index:])) / float(np.median(values[:c.index]))) for c in cps]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--otava", type=Path, help="a folder holding the unzipped otava package")
    parser.add_argument("--trials", type=int, default=TRIALS)
    args = parser.parse_args()
    if args.otava:
        sys.path.insert(0, str(args.otava))
    args.out.mkdir(parents=True, exist_ok=True)
    summary = {"commits": COMMITS, "runs_a_commit": RUNS_A_COMMIT, "trials": args.trials, "threshold": THRESHOLD,
               "max_pvalue": MAX_PVALUE, "runners": {}}
    examples = {}
    for name, folder in RUNNERS.items():
        runs, machine = pool(folder)
        rng = np.random.default_rng(73)
        medians = [np.median(rng.choice(runs, RUNS_A_COMMIT, replace=False)) for _ in range(2000)]
        sigma = float(np.std(np.log(medians)))
        runner = {"machine": machine, "calibration": str(folder.relative_to(REPO_ROOT)), "runs": len(runs),
                  "run_to_run_cv": float(np.std(runs) / np.mean(runs)), "commit_sd": sigma,
                  "floor_10_commits_each_side": floor.history_floor(sigma, 10, MAX_PVALUE),
                  "floor_5_commits_each_side": floor.history_floor(sigma, 5, MAX_PVALUE), "steps": []}
        for step in STEPS:
            tally = {"step": step, "detected": 0, "series_with_false_alarm": 0, "false_alarms": 0, "gate_fails": 0,
                     "otava_detected": 0, "otava_series_with_false_alarm": 0, "otava_false_alarms": 0}
            for trial in range(args.trials):
                values, at = synthetic(runs, step, rng)
                found, gate = ours(values)
                hit, false = score(found, at, step)
                tally["detected"] += hit
                tally["series_with_false_alarm"] += false > 0
                tally["false_alarms"] += false
                tally["gate_fails"] += gate
                if args.otava:
                    hit, false = score(otava(values), at, step)
                    tally["otava_detected"] += hit
                    tally["otava_series_with_false_alarm"] += false > 0
                    tally["otava_false_alarms"] += false
                if trial == 0 and step == 0.10:
                    examples[name] = (values, at, found)
            rates = {k: v / args.trials for k, v in tally.items() if k != "step"}
            runner["steps"].append({"step": step, **rates})
            print(f"{name} step {step:.0%}: detected {rates['detected']:.0%}, false alarms in "
                  f"{rates['series_with_false_alarm']:.0%} of series, gate fails {rates['gate_fails']:.0%}"
                  + (f"; Otava detected {rates['otava_detected']:.0%}, false alarms in "
                     f"{rates['otava_series_with_false_alarm']:.0%}" if args.otava else ""), flush=True)
        summary["runners"][name] = runner
    (args.out / "validation.json").write_text(json.dumps(summary, indent=1))
    draw(summary, examples, args.out, bool(args.otava))
    return 0


def draw(summary: dict, examples: dict, out: Path, with_otava: bool) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for (name, runner), colour in zip(summary["runners"].items(), ("tab:blue", "tab:orange")):
        steps = [s["step"] * 100 for s in runner["steps"]]
        label = f"{name} (a commit's sd {runner['commit_sd']:.1%})"
        axes[0].plot(steps, [s["detected"] * 100 for s in runner["steps"]], "o-", color=colour, label=f"dtbench, {label}")
        axes[1].plot(steps, [s["series_with_false_alarm"] * 100 for s in runner["steps"]], "o-", color=colour,
                     label=f"dtbench, {name}")
        axes[1].plot(steps, [s["gate_fails"] * 100 for s in runner["steps"]], "s:", color=colour,
                     label=f"dtbench gate exit 1, {name}")
        if with_otava:
            axes[0].plot(steps, [s["otava_detected"] * 100 for s in runner["steps"]], "x--", color=colour,
                         label=f"Otava defaults, {name}")
            axes[1].plot(steps, [s["otava_series_with_false_alarm"] * 100 for s in runner["steps"]], "x--",
                         color=colour, label=f"Otava defaults, {name}")
        axes[0].axvline(runner["floor_10_commits_each_side"] * 100, color=colour, lw=0.8, alpha=0.6)
    axes[0].set(xlabel="planted slowdown (%)", ylabel="found at its commit (% of series)",
                title="Detection (vertical: the predicted 80 % floor)")
    axes[1].set(xlabel="planted slowdown (%)", ylabel="% of series",
                title="Change points named elsewhere; the gate's exit 1")
    for ax, where in zip(axes, ("lower right", "center right")):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc=where)
        ax.set_ylim(-3, 103)
    fig.tight_layout()
    fig.savefig(out / "detection.png", dpi=110)
    plt.close(fig)
    fig, axes = plt.subplots(len(examples), 1, figsize=(11, 2.6 * len(examples)), squeeze=False)
    for ax, (name, (values, at, found)) in zip(axes[:, 0], examples.items()):
        ax.plot(values, "o-", ms=4, lw=0.8)
        ax.axvline(at - 0.5, color="green", lw=2, alpha=0.4, label=f"planted -10 % at commit {at}")
        for i, ratio in found:
            ax.axvline(i - 0.5, color="#b00020", ls="--", label=f"found at {i}: {(ratio - 1) * 100:+.1f} %")
        ax.set(ylabel="samples/s", title=f"{name}: one synthetic series (median of {RUNS_A_COMMIT} real runs a commit)")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("commit")
    fig.tight_layout()
    fig.savefig(out / "example.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
