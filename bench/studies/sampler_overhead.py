"""What does the time-series sampler cost a run? `bench overhead --of sampler`: torch-ddp on two slots, unsampled
against sampled at the default rate and at ten times it, interleaved.

Each round runs the three once, in an order that rotates from round to round, so that a shared machine's drift
and any order effect hit every side alike; each sampled run is judged against its round's unsampled one. The
faster rate shows whether a cost grows with the ticks: a cost ten times the ticks cannot hide below it.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import statistics

from scipy import stats as scipy_stats

from bench.results import stats
from bench.run.execute import execute
from bench.run.runspec import RunSpec
from bench.run.sampler import DEFAULT_INTERVAL_S
from bench.spec import devices
from bench.spec.task import get_task
from bench.spec.variants import SAMPLER_OVERHEAD_VARIANT, get_variant
from bench.status import Status
from bench.worker import data

log = logging.getLogger(__name__)
VARIANT = SAMPLER_OVERHEAD_VARIANT
RATES_S = (0.0, DEFAULT_INTERVAL_S, DEFAULT_INTERVAL_S / 10)  # 0: unsampled, the baseline


def main(args: argparse.Namespace) -> int:
    machine = devices.discover()
    task = get_task(args.task or "default", epochs=1)  # one epoch holds every timed window
    data_path = data.prepare(task)
    base = RunSpec(get_variant(VARIANT), task, machine.default_device_type,
                   devices_per_node=min(2, len(machine.gpus or machine.cores)), timeout_s=900)
    base.check(machine)
    rounds: list[dict[float, float]] = []
    for i in range(args.repeats):
        throughput = {}
        for rate in RATES_S[i % 3:] + RATES_S[:i % 3]:
            row = execute(dataclasses.replace(base, sample_every_s=rate), args.out, machine, data_path)
            if row.status != Status.OK:
                log.error("run failed: %s", row.error)
                return 1
            throughput[rate] = row.throughput["median"]
        log.info("round %d: %s", i + 1, ", ".join(f"every {r or 'never'}: {t:.0f}/s" for r, t in throughput.items()))
        rounds.append(throughput)
    result = {"variant": VARIANT, "devices": base.devices_per_node, "task": task.name,
              "device_type": machine.default_device_type, "rounds": [{str(r): t for r, t in x.items()} for x in rounds],
              "sampled": {str(rate): summarise([x[rate] / x[0.0] for x in rounds]) for rate in RATES_S[1:]}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "overhead-sampler.json").write_text(json.dumps(result, indent=1))
    for rate, s in result["sampled"].items():
        print(f"sampled every {rate} s / unsampled throughput: median {s['ratio_median']:.3f}, "
              f"{s['ci_coverage']:.0%} CI [{s['ratio_ci'][0]:.3f}, {s['ratio_ci'][1]:.3f}], Wilcoxon p "
              f"{s['wilcoxon_p']:.2g} over {len(s['ratios'])} rounds (target >= 0.99)")
    return 0


def summarise(ratios: list[float]) -> dict:
    low, high, coverage = stats.median_interval(ratios)
    return {"ratios": ratios, "ratio_median": statistics.median(ratios), "ratio_ci": [low, high],
            "ci_coverage": coverage, "wilcoxon_p": float(scipy_stats.wilcoxon([r - 1 for r in ratios]).pvalue)}
