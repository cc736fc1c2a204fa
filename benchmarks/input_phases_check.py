"""Whether the input phases (--input-phases) measure what the separate synthetic-input twin measures, more narrowly
(issue 74): for each approach, rounds of three runs in rotated order on this machine: the real input with its phases,
the real input without, and the synthetic-input twin. The in-run input cost is 1 - the phases' real over resident
ratio; the separate-run one is 1 - real / twin throughput over the rounds' run medians.

    .venv/bin/python benchmarks/input_phases_check.py --out results/input-phases-cpu [--rounds 3]

Writes OUT/results.jsonl (every run's row: a rerun goes on from it), OUT/check.json and OUT/check.md."""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench import REPO_ROOT

# (label, variant, devices): each framework's plain loop and its one-process and per-process data parallelism.
APPROACHES = (("torch-single", "torch-single", 1), ("torch-ddp 2", "torch-ddp", 2),
              ("tf-single", "tf-single", 1), ("tf-mirrored 2", "tf-mirrored", 2))
TASK = ("--task", "default", "--epochs", "1")
SIDES = {"phases": ("--input-phases",), "real": (), "twin": ("--input", "synthetic")}


def run(out: Path, variant: str, devices: int, side: str, tag: str) -> dict:
    """One `bench run`, its row (tagged with its side and round) appended to OUT/results.jsonl."""
    before = rows(out)
    done = subprocess.run([sys.executable, "-m", "bench", "run", "--variant", variant, "--devices", str(devices),
                           *TASK, *SIDES[side], "--out", str(out)], cwd=REPO_ROOT, capture_output=True, text=True,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    new = [r for r in rows(out) if r["run_id"] not in {b["run_id"] for b in before}]
    if done.returncode != 0 or len(new) != 1:
        raise SystemExit(f"{variant} {side}: exit {done.returncode}: {done.stderr.strip()[-500:]}")
    with open(out / "sides.jsonl", "a") as f:
        f.write(json.dumps({"run_id": new[0]["run_id"], "side": side, "tag": tag}) + "\n")
    return new[0]


def rows(out: Path) -> list[dict]:
    path = out / "results.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def check(out: Path) -> list[dict]:
    sides = {}
    if (out / "sides.jsonl").exists():
        for line in (out / "sides.jsonl").read_text().splitlines():
            s = json.loads(line)
            sides[s["run_id"]] = s
    found = []
    for label, variant, devices in APPROACHES:
        mine = [(sides[r["run_id"]]["side"], r) for r in rows(out)
                if r["run_id"] in sides and sides[r["run_id"]]["tag"].startswith(label + "/") and r["status"] == "ok"]
        phases = [r["input_phases"] for side, r in mine if side == "phases"]
        real = [r["throughput"]["median"] for side, r in mine if side == "real"]
        twin = [r["throughput"]["median"] for side, r in mine if side == "twin"]
        if not phases or not real or not twin:
            continue
        in_run = [1 - p["real_over_resident"] for p in phases]
        widths = [p["ci_high"] - p["ci_low"] for p in phases]
        # The separate runs' cost per round (real and twin of one round), and its spread over the rounds.
        separate = [1 - r / t for r, t in zip(real, twin)]
        found.append({
            "approach": label, "rounds": len(separate),
            "in_run_cost": statistics.median(in_run), "in_run_costs": in_run,
            "in_run_interval_width": statistics.median(widths),
            "separate_cost": 1 - statistics.median(real) / statistics.median(twin), "separate_costs": separate,
            "separate_spread": max(separate) - min(separate),
            "within_separate_spread": min(separate) <= statistics.median(in_run) <= max(separate),
        })
    return found


def markdown(found: list[dict], header: str) -> str:
    lines = [header, "", "| approach | rounds | in-run input cost (median; per run) | in-run 95 % interval width | "
             "separate-run cost (medians; per round) | separate runs' spread | in-run within it | narrower by |",
             "|---|---|---|---|---|---|---|---|"]
    for f in found:
        per_run = ", ".join(f"{c:.1%}" for c in f["in_run_costs"])
        per_round = ", ".join(f"{c:.1%}" for c in f["separate_costs"])
        ratio = f["separate_spread"] / f["in_run_interval_width"] if f["in_run_interval_width"] else float("inf")
        lines.append(f"| {f['approach']} | {f['rounds']} | {f['in_run_cost']:.1%} ({per_run}) | "
                     f"{f['in_run_interval_width']:.1%} | {f['separate_cost']:.1%} ({per_round}) | "
                     f"{f['separate_spread']:.1%} | {'yes' if f['within_separate_spread'] else 'no'} | {ratio:.1f}x |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["tag"] for line in (args.out / "sides.jsonl").read_text().splitlines()} \
        if (args.out / "sides.jsonl").exists() else set()
    order = list(SIDES)
    for k in range(args.rounds):
        for label, variant, devices in APPROACHES:
            for side in order[k % 3:] + order[:k % 3]:  # rotated: no side always first after a start
                tag = f"{label}/{k}/{side}"
                if tag not in done:
                    print(tag, flush=True)
                    run(args.out, variant, devices, side, tag)
    found = check(args.out)
    (args.out / "check.json").write_text(json.dumps(found, indent=1))
    header = (f"# The input's cost in the run against its separate twin\n\n{datetime.now(timezone.utc):%Y-%m-%d}, "
              f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
              f"`{' '.join(sys.argv)}`")
    (args.out / "check.md").write_text(markdown(found, header))
    print(markdown(found, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
