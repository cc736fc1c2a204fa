"""How far `bench project` can be trusted, measured on this machine (issue 41): two namespace hosts
(bench.studies.netns) whose link is shaped to several rates with tc's token bucket. From what one host measured (a
sweep on 1 and 2 slots, its collectives) and the link between the hosts at each rate (`bench collectives` across
them), each approach is projected to 2 devices on 2 nodes; then it runs across the two hosts at that rate, repeats
interleaved over rates and approaches, and the projection is held against what it measured.

    sudo .venv/bin/python benchmarks/projection_check.py --out results/projection-check-cpu [--rates 50mbit,200mbit,1gbit,none]

Writes OUT/one-host/ (the sweep the projection reads), OUT/link-<rate>/ (the collectives across the hosts),
OUT/two-host-<rate>/ (the runs), OUT/check.jsonl (a line per approach and rate: predicted and measured with their
intervals) and OUT/check.md; OUT/error.json is the worst error, which `bench project` widens its intervals by.
Needs root (network namespaces); makes nothing but its two namespaces, and deletes them and their qdiscs on every
exit (an interrupt or SIGTERM included; one killed outright leaves them for the next run to delete)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import signal
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench import REPO_ROOT
from bench.analysis import project
from bench.results import ResultStore, aggregate, peak
from bench.results.frame import frame
from bench.studies import netns

log = logging.getLogger(__name__)

# The approaches issue 41 names, each as `bench run` options: (label, variant, extra options).
APPROACHES = (("torch-ddp", "torch-ddp", ()), ("torch-fsdp", "torch-fsdp", ()),
              ("deepspeed ZeRO-1", "deepspeed", ("--zero-stage", "1")),
              ("deepspeed ZeRO-3", "deepspeed", ("--zero-stage", "3")),
              ("tf-multiworker", "tf-multiworker", ()))
TASK = ("--task", "default", "--epochs", "1")
PORT = "29571"
CPU = {"CUDA_VISIBLE_DEVICES": ""}


def bench(*argv: str, host: netns.Host | None = None) -> subprocess.Popen:
    """`python -m bench ARGV` started on `host` (this host's network where None), its output kept."""
    command = [sys.executable, "-m", "bench", *argv]
    return subprocess.Popen(host.command(*command) if host else command, cwd=REPO_ROOT,
                            env={**os.environ, **CPU}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def on_two_hosts(hosts, out: Path, *argv: str) -> None:
    """One command of `bench` across both hosts (node 0's folder `out`, node 1's `out/node1`), both waited for."""
    agents = [bench(*argv, "--nnodes", "2", "--node-rank", str(rank), "--master-addr", hosts[0].address,
                    "--master-port", PORT, "--out", str(out if rank == 0 else out / "node1"), host=host)
              for rank, host in enumerate(hosts)]
    for agent in agents:
        _, err = agent.communicate(timeout=900)
        if agent.returncode != 0:
            log.warning("%s failed on a host: %s", argv[:3], err.strip().splitlines()[-1:] or "")


def one_host(out: Path, repeats: int) -> None:
    """What the projection reads: every approach on 1 and 2 slots of one host (the analysis runs it needs not:
    no-sync twins, synthetic input), and its collectives on 2 slots."""
    if ResultStore(out).dicts():
        return
    variants = ",".join(dict.fromkeys(variant for _, variant, _ in APPROACHES))
    sweep = bench("sweep", "--variants", variants, "--zero-stage", "1,3", "--devices", "1,2", "--no-analysis",
                  "--repeats", str(repeats), *TASK, "--out", str(out))
    _, err = sweep.communicate()
    if sweep.returncode not in (0, 1):
        raise SystemExit(f"the one-host sweep failed: {err.strip()[-500:]}")
    measured = bench("collectives", "--devices", "2", "--out", str(out))
    _, err = measured.communicate()
    if measured.returncode:
        raise SystemExit(f"the one-host collectives failed: {err.strip()[-500:]}")


def label(rate: str | None) -> str:
    return rate or "unshaped"


def measure(out: Path, rates: list[str | None], repeats: int) -> None:
    """Per rate, the link across the hosts and every approach's two-host run, repeats interleaved: each round
    visits the rates and the approaches in an order rotated by one from the last."""
    with netns.two_hosts(subnet=91) as hosts:
        for round_ in range(repeats):
            for r in range(len(rates)):
                rate = rates[(r + round_) % len(rates)]
                for host in hosts:
                    netns.shape(host, rate)
                link = out / f"link-{label(rate)}"
                if not (link / "allreduce.jsonl").exists():
                    log.info("collectives across the hosts at %s", label(rate))
                    on_two_hosts(hosts, link, "collectives", "--devices", "2")
                for a in range(len(APPROACHES)):
                    name, variant, extra = APPROACHES[(a + round_ + r) % len(APPROACHES)]
                    log.info("round %d, %s: %s across the hosts", round_ + 1, label(rate), name)
                    on_two_hosts(hosts, out / f"two-host-{label(rate)}", "run", "--variant", variant,
                                 "--devices", "2", *extra, *TASK, "--timeout", "600")


def compare(out: Path, rates: list[str | None]) -> list[dict]:
    """Per rate and approach: the projection to 2 devices on 2 nodes, and what the two-host runs measured."""
    lines = []
    for rate in rates:
        link_dir, runs = out / f"link-{label(rate)}", out / f"two-host-{label(rate)}"
        far = project.between_nodes(link_dir)
        result = project.folder(out / "one-host", counts=(2,), devices_per_node=1, far=far)
        measured = aggregate.configurations(frame(ResultStore(runs).dicts()), peak.load(runs))
        measured = measured[(measured["status"] == "ok") & (measured["world_size"] == 2)]
        by_series = {line["key"].series: line for _, line in measured.iterrows()}
        for a in result["approaches"]:
            [point] = result["table"][a.series]
            line = by_series.get(a.series)
            row = {"rate": label(rate), "series": a.series, "kind": a.kind,
                   "link_busbw_gbps": far["all_reduce"].busbw / 1e9, "link_alpha_us": far["all_reduce"].alpha_s * 1e6,
                   "predicted": point.throughput[0], "predicted_low": point.throughput[1],
                   "predicted_high": point.throughput[2], "exposed_fraction": point.exposed_fraction}
            if line is not None:
                row.update(measured=float(line["throughput"]), measured_low=float(line["ci_low"]),
                           measured_high=float(line["ci_high"]), runs=int(line.get("runs", 1) or 1),
                           error=point.throughput[0] / float(line["throughput"]) - 1)
            lines.append(row)
    return lines


def machine() -> str:
    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor())
    return f"{name}, {os.cpu_count()} logical CPUs"


def write(out: Path, lines: list[dict], command: str) -> None:
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    (out / "check.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    errors = [abs(line["error"]) for line in lines if "error" in line]
    summary = {"worst_error": max(errors) if errors else None, "configurations": len(errors),
               "within_10_percent": sum(e <= 0.10 for e in errors), "date": stamp, "machine": machine(),
               "command": command}
    (out / "error.json").write_text(json.dumps(summary, indent=1) + "\n")
    table = ["| link | approach | link all-reduce busbw | projected samples/s [interval] | measured samples/s "
             "[interval] | projected / measured − 1 |", "|---|---|---|---|---|---|"]
    for line in lines:
        got = (f"{line['measured']:,.0f} [{line['measured_low']:,.0f}, {line['measured_high']:,.0f}]"
               if "measured" in line else "not measured")
        error = f"{line['error']:+.1%}" if "error" in line else "–"
        table.append(f"| {line['rate']} | {line['series']} | {line['link_busbw_gbps'] * 8e3:,.0f} Mbit/s | "
                     f"{line['predicted']:,.0f} [{line['predicted_low']:,.0f}, {line['predicted_high']:,.0f}] | "
                     f"{got} | {error} |")
    verdict = (f"Worst error {summary['worst_error']:.1%}; {summary['within_10_percent']} of "
               f"{summary['configurations']} configurations within ±10 %." if errors else "No configuration was measured.")
    (out / "check.md").write_text(
        f"# How far the projection holds: predicted against measured across two namespace hosts\n\n"
        f"{stamp} on {machine()}: `{command}`\n\n"
        "Projected from the one-host sweep (`one-host/`) and the collectives measured across the hosts at each "
        "link rate (`link-*/`); measured by the same approaches run across the hosts (`two-host-*/`), repeats "
        "interleaved. Default task, one epoch, one rank a host.\n\n" + "\n".join(table) + f"\n\n{verdict}\n")


def interrupted(signum, frame) -> None:
    """SIGTERM as Ctrl-C: the namespaces' clean-up runs on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/projection_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/projection-check-cpu"))
    parser.add_argument("--rates", default="50mbit,200mbit,1gbit,none",
                        help="link rates, tc's units; none: unshaped (default 50mbit,200mbit,1gbit,none)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each approach at each rate (default 2)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if why := netns.why_no_namespaces():
        print(f"error: {why}: run it as root on Linux", file=sys.stderr)
        return 2
    rates = [None if r.strip() == "none" else r.strip() for r in args.rates.split(",") if r.strip()]
    for rate in rates:
        if rate:
            netns.bits_per_s(rate)
    signal.signal(signal.SIGTERM, interrupted)
    args.out.mkdir(parents=True, exist_ok=True)
    one_host(args.out / "one-host", args.repeats)
    measure(args.out, rates, args.repeats)
    lines = compare(args.out, rates)
    write(args.out, lines, "python benchmarks/projection_check.py " + " ".join(argv or sys.argv[1:]))
    print((args.out / "check.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
