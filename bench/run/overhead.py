"""How much does the harness cost? torch-ddp on 1 device vs a plain loop, interleaved A/B.

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
from bench.spec.variants import DEFAULT_COMPARED, get_variant

log = logging.getLogger(__name__)


def plain_loop_throughput(spec: RunSpec, placement: devices.Placement, run_dir: Path, data_path: Path | None,
                          timeout_s: float) -> float:
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = write_spec(spec, placement, run_dir.name, run_dir, data_path)
    env = {**os.environ, **node_environment(spec, placement.nodes[0], run_dir.name, run_dir)}
    out = subprocess.run([sys.executable, "-m", "probes.plain_loop", "--spec", str(spec_path)], env=env,
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"plain loop failed:\n{out.stderr[-2000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    return stats.throughput_summary(result["window_seconds"], result["samples_per_window"])["median"]


def main(args: argparse.Namespace) -> int:
    machine = devices.discover()
    # One epoch holds every timed window; a second would only lengthen each pair.
    task = get_task(args.task, epochs=1)
    spec = RunSpec(get_variant(DEFAULT_COMPARED), task, machine.default_device_type, timeout_s=900)
    placement = spec.check(machine)
    data_path = data.prepare(task)
    out: Path = args.out
    pairs = []
    for i in range(args.repeats):
        # A B, then B A: whatever favours the first (or second) run of a pair cancels out.
        harness = plain = None
        for side in ("AB" if i % 2 == 0 else "BA"):
            if side == "A":
                row = execute(spec, out, machine, data_path)
                if row.status != "ok":
                    log.error("harness run failed: %s", row.error)
                    return 1
                harness = row.throughput["median"]
            else:
                plain = plain_loop_throughput(spec, placement, out / "plain" / f"pair{i}", data_path, 900)
        pairs.append((harness, plain))
        log.info("pair %d: harness torch-ddp %.0f samples/s, plain loop %.0f samples/s, ratio %.3f",
                 i + 1, harness, plain, harness / plain)
    ratios = [h / p for h, p in pairs]
    low, high, coverage = stats.median_interval(ratios)
    summary = {"task": task.name, "device_type": spec.device_type, "pairs": pairs, "ratios": ratios,
               "ratio_median": statistics.median(ratios), "ratio_ci": [low, high], "ci_coverage": coverage,
               "ratio_of_medians": statistics.median(h for h, _ in pairs) / statistics.median(p for _, p in pairs)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "overhead.json").write_text(json.dumps(summary, indent=1))
    print(f"harness/plain throughput ratio: median {summary['ratio_median']:.3f}, "
          f"{coverage:.0%} CI [{low:.3f}, {high:.3f}] over {len(ratios)} pairs "
          f"(pairs: {', '.join(f'{r:.3f}' for r in ratios)}; target >= 0.97)")
    return 0
