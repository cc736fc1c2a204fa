"""How far `bench project` can be trusted, measured on this machine (issue 41): two namespace hosts
(bench.studies.netns) whose link is shaped to several rates with tc's token bucket, one core each. Each round, each
approach runs on 1 and 2 slots of one host (what `bench project` reads) and at once across the two hosts at every
rate; its projection to 2 devices on 2 nodes, from those one-host runs and the link measured across the hosts at
that rate (`bench collectives`), is held against what the two-host runs measured.

    sudo .venv/bin/python benchmarks/projection_check.py --out results/projection-check-cpu [--rates 50mbit,200mbit,1gbit,none]

Writes OUT/near-link/ and OUT/link-<rate>/ (the collectives on one host and across the hosts), OUT/round-<k>/
(one-host/ and two-host-<rate>/: the runs; a rerun goes on from what the folders hold), OUT/check.jsonl (a line per
approach and rate: projected and measured, with their ranges over rounds), OUT/check.md, and OUT/error.json (the
worst error, which `bench project` widens its intervals by). Needs root (network namespaces); makes nothing but its
two namespaces, and deletes them and their qdiscs on every exit (an interrupt or SIGTERM included; one killed
outright leaves them for the next run to delete)."""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

from bench import REPO_ROOT
from bench.projection import project
from bench.results import ResultStore, peak
from bench.analysis import aggregate
from bench.results.frame import frame
from bench.spec.task import SpecError
from bench.studies import netns
from bench.analysis.folder import Folder

log = logging.getLogger(__name__)

# The approaches issue 41 names, each as `bench run` options: (label, variant, extra options).
APPROACHES = (("torch-ddp", "torch-ddp", ()), ("torch-fsdp", "torch-fsdp", ()),
              ("deepspeed ZeRO-1", "deepspeed", ("--zero-stage", "1")),
              ("deepspeed ZeRO-3", "deepspeed", ("--zero-stage", "3")),
              ("tf-multiworker", "tf-multiworker", ()))
TASK = ("--task", "default", "--epochs", "1", "--scaling", "weak")  # as the sweep: each device keeps its batch
PORT = "29571"
CPU = {"CUDA_VISIBLE_DEVICES": ""}


def bench(*argv: str) -> subprocess.Popen:
    """`python -m bench ARGV` started on this host, its output kept."""
    return subprocess.Popen([sys.executable, "-m", "bench", *argv], cwd=REPO_ROOT, env={**os.environ, **CPU},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def on_two_hosts(hosts, out: Path, *argv: str) -> None:
    """One command of `bench` across both hosts (node 0's folder `out`, node 1's `out/node1`), both waited for."""
    agents = netns.bench_on_hosts(hosts, PORT, out, *argv, cwd=REPO_ROOT, env={**os.environ, **CPU},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for agent in agents:
        _, err = agent.communicate(timeout=900)
        if agent.returncode != 0:
            log.warning("%s failed on a host: %s", argv[:3], err.strip().splitlines()[-1:] or "")


def near_link(out: Path) -> Path:
    """The collectives on 2 slots of one host (the link the measured 2-slot runs used), measured once."""
    near = out / "near-link"
    if not (near / "allreduce.jsonl").exists():
        waited(bench("collectives", "--devices", "2", "--out", str(near)), "the one-host collectives")
    return near


def waited(process: subprocess.Popen, what: str, ok: tuple[int, ...] = (0,)) -> None:
    """Wait for a command on this host; interrupted, it is interrupted too (it records and cleans up its run)."""
    try:
        _, err = process.communicate()
    except BaseException:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=60)
        raise
    if process.returncode not in ok:
        log.warning("%s failed: %s", what, err.strip()[-300:])


def label(rate: str | None) -> str:
    return rate or "unshaped"


def measure(out: Path, rates: list[str | None], repeats: int) -> None:
    """The link across the hosts at each rate, once; then, each round, every approach's inputs to the projection
    (its runs on 1 and 2 slots of one host) followed at once by its runs across the hosts at every rate, so that the
    machine's drift (15 % over 20 minutes was seen) reaches a projection's inputs and the runs it predicts alike.
    Each round rotates the order of the approaches and of the rates."""
    near = near_link(out)
    with netns.two_hosts(subnet=91) as hosts:
        for rate in rates:
            link = out / f"link-{label(rate)}"
            if not (link / "allreduce.jsonl").exists():
                for host in hosts:
                    netns.shape(host, rate)
                log.info("collectives across the hosts at %s", label(rate))
                on_two_hosts(hosts, link, "collectives", "--devices", "2")
        for round_ in range(repeats):
            folder = out / f"round-{round_ + 1}"
            (folder / "one-host").mkdir(parents=True, exist_ok=True)
            for table in ("allreduce.jsonl", "collectives.jsonl"):  # the near link, for `bench project`'s fits
                shutil.copy(near / table, folder / "one-host" / table)
            for a in range(len(APPROACHES)):
                name, variant, extra = APPROACHES[(a + round_) % len(APPROACHES)]
                for devices in (1, 2):  # a rerun goes on from the runs the folders hold
                    if not ran(folder / "one-host", variant, extra, devices):
                        log.info("round %d: %s on %d slot(s) of one host", round_ + 1, name, devices)
                        waited(bench("run", "--variant", variant, "--devices", str(devices), *extra, *TASK,
                                     "--out", str(folder / "one-host")), f"{name} on one host")
                for r in range(len(rates)):
                    rate = rates[(r + a + round_) % len(rates)]
                    runs = folder / f"two-host-{label(rate)}"
                    if ran(runs, variant, extra, 2):
                        continue
                    for host in hosts:
                        netns.shape(host, rate)
                    log.info("round %d, %s: %s across the hosts", round_ + 1, label(rate), name)
                    on_two_hosts(hosts, runs, "run", "--variant", variant, "--devices", "2", *extra, *TASK,
                                 "--timeout", "600")


def ran(runs: Path, variant: str, extra: tuple[str, ...], world: int) -> int:
    """How many runs of the approach on `world` devices the folder holds, whatever their status."""
    stage = int(extra[1]) if extra else None
    return sum(r["variant"] == variant and r["world_size"] == world
               and (stage is None or r["task"].get("zero_stage") == stage) for r in ResultStore(runs).dicts())


def compare(out: Path, rates: list[str | None], repeats: int) -> list[dict]:
    """Per rate and approach: each round's projection to 2 devices on 2 nodes from that round's one-host runs,
    against that round's runs across the hosts; the line holds their medians over rounds and each round's error."""
    lines = []
    for rate in rates:
        try:
            far = project.between_nodes(out / f"link-{label(rate)}")
        except SpecError as missing:
            log.warning("%s: no projection (%s)", label(rate), missing)
            lines += [{"rate": label(rate), "series": name, "not_projected": "the link was not measured"}
                      for name, _, _ in APPROACHES]
            continue
        rounds: dict[str, list[tuple]] = {}
        for round_ in range(repeats):
            folder = out / f"round-{round_ + 1}"
            result = project.folder(Folder.read(folder / "one-host"), counts=(2,), devices_per_node=1, far=far)
            runs = folder / f"two-host-{label(rate)}"
            measured = aggregate.configurations(frame(ResultStore(runs).dicts()), peak.load(runs))
            measured = measured[(measured["status"] == "ok") & (measured["world_size"] == 2)]
            by_series = {line["key"].series: float(line["throughput"]) for _, line in measured.iterrows()}
            for a in result["approaches"]:
                [point] = result["table"][a.series]
                rounds.setdefault(a.series, []).append((point, by_series.get(a.series), a.kind))
        for series, points in rounds.items():
            predicted = [p.throughput[0] for p, _, _ in points]
            got = [m for _, m, _ in points if m is not None]
            row = {"rate": label(rate), "series": series, "kind": points[0][2],
                   "link_busbw_gbps": far["all_reduce"].busbw / 1e9, "link_alpha_us": far["all_reduce"].alpha_s * 1e6,
                   "predicted": statistics.median(predicted), "predicted_low": min(p.throughput[1] for p, _, _ in points),
                   "predicted_high": max(p.throughput[2] for p, _, _ in points),
                   "exposed_fraction": statistics.median(p.exposed_fraction for p, _, _ in points),
                   "rounds": len(points)}
            if got:
                row.update(measured=statistics.median(got), measured_low=min(got), measured_high=max(got),
                           runs=len(got), error=statistics.median(predicted) / statistics.median(got) - 1,
                           round_errors=[p.throughput[0] / m - 1 for p, m, _ in points if m is not None])
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
               "within_10_percent": sum(e <= 0.10 for e in errors), "not_measured": len(lines) - len(errors),
               "date": stamp, "machine": machine(), "command": command}
    (out / "error.json").write_text(json.dumps(summary, indent=1) + "\n")
    table = ["| link | approach | link all-reduce busbw | projected samples/s [interval] | measured samples/s "
             "[interval] | projected / measured − 1 |", "|---|---|---|---|---|---|"]
    for line in lines:
        if "not_projected" in line:
            table.append(f"| {line['rate']} | {line['series']} | – | not projected: {line['not_projected']} | – | – |")
            continue
        got = (f"{line['measured']:,.0f} [{line['measured_low']:,.0f}, {line['measured_high']:,.0f}]"
               if "measured" in line else "not measured")
        error = f"{line['error']:+.1%}" if "error" in line else "–"
        table.append(f"| {line['rate']} | {line['series']} | {line['link_busbw_gbps'] * 8e3:,.0f} Mbit/s | "
                     f"{line['predicted']:,.0f} [{line['predicted_low']:,.0f}, {line['predicted_high']:,.0f}] | "
                     f"{got} | {error} |")
    verdict = (f"Worst error {summary['worst_error']:.1%}; {summary['within_10_percent']} of "
               f"{summary['configurations']} configurations within ±10 %; {summary['not_measured']} not measured."
               if errors else "No configuration was measured.")
    (out / "check.md").write_text(
        f"# How far the projection holds: predicted against measured across two namespace hosts\n\n"
        f"{stamp} on {machine()}: `{command}`\n\n"
        "Each round, each approach ran on 1 and 2 slots of one host (`round-*/one-host/`, the projection's inputs, "
        "with the collectives on one host in `near-link/`) and at once across the two hosts at every link rate "
        "(`round-*/two-host-*/`); the link between the hosts was measured once a rate (`link-*/`). A line: the "
        "median over rounds of each round's projection from its own inputs, against the median of what the rounds "
        "measured (interval: lowest and highest). Default task, one epoch, weak scaling, one rank and one core a "
        "host.\n\n" + "\n".join(table) + f"\n\n{verdict}\n")


def interrupted(signum, frame) -> None:
    """SIGINT and SIGTERM as Ctrl-C: the namespaces' clean-up runs on the way out."""
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
    for stop in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a background job starts with it ignored
        signal.signal(stop, interrupted)
    args.out.mkdir(parents=True, exist_ok=True)
    measure(args.out, rates, args.repeats)
    lines = compare(args.out, rates, args.repeats)
    write(args.out, lines, "python benchmarks/projection_check.py " + " ".join(argv or sys.argv[1:]))
    print((args.out / "check.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
