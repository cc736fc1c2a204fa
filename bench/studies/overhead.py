"""How much does the harness cost? Per framework, its harness run on 1 device (torch-ddp, tf-single) against a
plain loop of that framework (probes/), interleaved A/B.

Both train the same model, batch and data on the same pinned core(s) with the
same thread count; each run is a fresh process. Pairs alternate A B, B A so
that drifts of a shared machine and order effects hit both sides alike.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
from pathlib import Path

from bench import REPO_ROOT
from bench.results import stats
from bench.worker import data
from bench.run.execute import execute, write_spec
from bench.run.launch import node_environment
from bench.run.runspec import RunSpec
from bench.spec import devices
from bench.spec.task import get_task
from bench.spec.variants import OVERHEAD_PAIRS, get_variant

log = logging.getLogger(__name__)


def plain_loop_throughput(probe: str, spec: RunSpec, placement: devices.Placement, run_dir: Path,
                          data_path: Path | None, timeout_s: float) -> float:
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = write_spec(spec, placement, run_dir.name, run_dir, data_path)
    env = {**os.environ, **node_environment(spec, placement.nodes[0], run_dir.name, run_dir)}
    out = subprocess.run([sys.executable, "-m", probe, "--spec", str(spec_path)], env=env,
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"plain loop failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return stats.throughput_summary(result["window_seconds"], result["samples_per_window"])["median"]


def main(args: argparse.Namespace) -> int:
    machine = devices.discover()
    # One epoch holds every timed window; a second would only lengthen each pair.
    task = get_task(args.task, epochs=1)
    data_path = data.prepare(task)
    frameworks = list(OVERHEAD_PAIRS) if args.framework == "both" else [args.framework]
    summaries = {}
    for i in range(args.repeats):
        for framework in frameworks:  # the frameworks' pairs interleaved too: drift hits both alike
            summaries.setdefault(framework, {"pairs": []})
            pair = measure_pair(framework, task, machine, data_path, args.out, i)
            if pair is None:
                return 1
            summaries[framework]["pairs"].append(pair)
    args.out.mkdir(parents=True, exist_ok=True)
    for framework, summary in summaries.items():
        summary.update(summarise(summary["pairs"]), task=task.name, device_type=machine.default_device_type,
                       harness=OVERHEAD_PAIRS[framework][0], plain_loop=OVERHEAD_PAIRS[framework][1])
        low, high = summary["ratio_ci"]
        print(f"{framework}: harness {summary['harness']} / plain loop throughput ratio: median "
              f"{summary['ratio_median']:.3f}, {summary['ci_coverage']:.0%} CI [{low:.3f}, {high:.3f}] over "
              f"{len(summary['ratios'])} pairs (pairs: {', '.join(f'{r:.3f}' for r in summary['ratios'])}; "
              "target >= 0.97)")
    (args.out / "overhead.json").write_text(json.dumps(summaries, indent=1))
    return 0


def measure_pair(framework: str, task, machine, data_path: Path | None, out: Path, i: int) -> tuple | None:
    """One A/B pair: the harness run and the plain loop, in A B order on even pairs and B A on odd ones."""
    variant, probe = OVERHEAD_PAIRS[framework]
    spec = RunSpec(get_variant(variant), task, machine.default_device_type, timeout_s=900)
    placement = spec.check(machine)
    harness = plain = None
    for side in ("AB" if i % 2 == 0 else "BA"):
        if side == "A":
            row = execute(spec, out, machine, data_path)
            if row.status != "ok":
                log.error("harness run failed: %s", row.error)
                return None
            harness = row.throughput["median"]
        else:
            plain = plain_loop_throughput(probe, spec, placement, out / "plain" / f"{framework}-pair{i}", data_path, 900)
    log.info("pair %d: harness %s %.0f samples/s, plain loop %.0f samples/s, ratio %.3f",
             i + 1, variant, harness, plain, harness / plain)
    return harness, plain


def summarise(pairs: list[tuple[float, float]]) -> dict:
    ratios = [h / p for h, p in pairs]
    low, high, coverage = stats.median_interval(ratios)
    return {"ratios": ratios, "ratio_median": statistics.median(ratios), "ratio_ci": [low, high],
            "ci_coverage": coverage,
            "ratio_of_medians": statistics.median(h for h, _ in pairs) / statistics.median(p for _, p in pairs)}
