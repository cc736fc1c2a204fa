"""How far `bench project` can be trusted, measured on this machine (issues 41, 75): two namespace hosts
(bench.studies.netns) whose link is shaped to several rates with tc's token bucket, one core each. Each round, each
model of the grid (MODELS) and each approach it runs under runs on 1 and 2 slots of one host (what `bench project`
reads) and at once across the two hosts at every rate; its projection to 2 devices on 2 nodes, from those one-host
runs and the link measured across the hosts at that rate (`bench collectives`), is held against what the two-host
runs measured.

Held out by construction: the one thing the projection takes from this check, the error its intervals are widened
by, is fitted on named points only (--fitted MODELS of the grid, and --fitted-check, an earlier check's points
projected again); every other point is scored (per rate: MAPE, worst error, the approaches' order, the measured
figure inside the interval widened by the fitted error), and error.json's worst_error, what `bench project`
widens by, is the held-out one.

    sudo .venv/bin/python benchmarks/projection_check.py --out results/projection-heldout-cpu \
        [--models small-cnn,mnist-cnn,timm-resnet10t] [--rates 50mbit,100mbit,1gbit,none] [--fitted small-cnn]

Writes OUT/near-link/ and OUT/link-<rate>/ (the collectives on one host and across the hosts), OUT/<model>/round-<k>/
(one-host/ and two-host-<rate>/: the runs; a rerun goes on from what the folders hold), OUT/check.jsonl (a line per
model, approach and rate: projected and measured, with their ranges over rounds, fitted or held out), OUT/check.md,
and OUT/error.json (the held-out error, which `bench project` widens its intervals by). Needs root (network
namespaces); makes nothing but its two namespaces, and deletes them and their qdiscs on every exit (an interrupt
or SIGTERM included; one killed outright leaves them for the next run to delete)."""
from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import dataclasses
from dataclasses import dataclass
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
from bench.metrics import present

log = logging.getLogger(__name__)

# The approaches issue 41 names, each as `bench run` options: (label, variant, extra options).
APPROACHES = (("torch-ddp", "torch-ddp", ()), ("torch-fsdp", "torch-fsdp", ()),
              ("deepspeed ZeRO-1", "deepspeed", ("--zero-stage", "1")),
              ("deepspeed ZeRO-3", "deepspeed", ("--zero-stage", "3")),
              ("tf-multiworker", "tf-multiworker", ()))
TASK = ("--task", "default", "--epochs", "1", "--scaling", "weak")  # as the sweep: each device keeps its batch


@dataclass(frozen=True)
class Model:
    """One model of the grid: its `bench run` task options (weak scaling, as the sweep) and the approaches it
    runs under (timm's models are PyTorch's only)."""
    name: str
    parameters: str
    task: tuple[str, ...]
    approaches: tuple[str, ...]


EVERY = tuple(name for name, _, _ in APPROACHES)
TORCH = tuple(name for name in EVERY if name != "tf-multiworker")
# Each short enough that a two-host run at 50 Mbit/s takes about a minute on two cores.
MODELS = {m.name: m for m in (
    Model("small-cnn", "0.1 M", TASK, EVERY),
    Model("mnist-cnn", "1.2 M", ("--task", "mnist-cnn", "--epochs", "1", "--steps-per-epoch", "40",
                                 "--warmup-steps", "5", "--window-steps", "5", "--windows", "6", "--scaling", "weak"),
          EVERY),
    Model("timm-resnet10t", "4.9 M", ("--task", "quick", "--model", "timm:resnet10t", "--image-size", "32",
                                      "--channels", "3", "--epochs", "3", "--scaling", "weak"), TORCH),
)}
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


def measure(out: Path, rates: list[str | None], repeats: int, models: list[Model]) -> None:
    """The link across the hosts at each rate, once; then, each round and model, every approach's inputs to the
    projection (its runs on 1 and 2 slots of one host) followed at once by its runs across the hosts at every rate,
    so that the machine's drift (15 % over 20 minutes was seen) reaches a projection's inputs and the runs it
    predicts alike. Each round rotates the order of the approaches and of the rates."""
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
            for model in models:
                folder = round_folder(out, model, round_)
                (folder / "one-host").mkdir(parents=True, exist_ok=True)
                for table in ("allreduce.jsonl", "collectives.jsonl"):  # the near link, for `bench project`'s fits
                    shutil.copy(near / table, folder / "one-host" / table)
                chosen = [a for a in APPROACHES if a[0] in model.approaches]
                for a in range(len(chosen)):
                    name, variant, extra = chosen[(a + round_) % len(chosen)]
                    for devices in (1, 2):  # a rerun goes on from the runs the folders hold
                        if not ran(folder / "one-host", variant, extra, devices):
                            log.info("round %d, %s: %s on %d slot(s) of one host", round_ + 1, model.name, name,
                                     devices)
                            waited(bench("run", "--variant", variant, "--devices", str(devices), *extra, *model.task,
                                         "--out", str(folder / "one-host")), f"{name} on one host")
                    for r in range(len(rates)):
                        rate = rates[(r + a + round_) % len(rates)]
                        runs = folder / f"two-host-{label(rate)}"
                        if ran(runs, variant, extra, 2):
                            continue
                        for host in hosts:
                            netns.shape(host, rate)
                        log.info("round %d, %s, %s: %s across the hosts", round_ + 1, model.name, label(rate), name)
                        on_two_hosts(hosts, runs, "run", "--variant", variant, "--devices", "2", *extra, *model.task,
                                     "--timeout", "600")


def round_folder(out: Path, model: Model, round_: int, flat: bool = False) -> Path:
    """OUT/<model>/round-<k>: the model's runs of one round (OUT/round-<k> in a check of one model, `flat`)."""
    return (out if flat else out / model.name) / f"round-{round_ + 1}"


def earlier(check: Path) -> list[dict]:
    """The points of an earlier check of the default task alone (OUT/round-<k>, its own links), projected again by
    today's projection: a set to fit on, measured apart from this grid."""
    rates = sorted({p.name.removeprefix("link-") for p in check.glob("link-*")})
    repeats = len(list(check.glob("round-*")))
    if not rates or not repeats:
        raise SpecError(f"--fitted-check {check}: no link-*/ and round-*/ folders there: name a folder "
                        "benchmarks/projection_check.py wrote")
    model = Model(f"small-cnn ({check.name})", MODELS["small-cnn"].parameters, TASK, EVERY)
    lines = compare(check, [None if r == "unshaped" else r for r in rates], repeats, [model], flat=True)
    for line in lines:
        line["split"] = "fitted"
    return lines


def ran(runs: Path, variant: str, extra: tuple[str, ...], world: int) -> int:
    """How many runs of the approach on `world` devices the folder holds, whatever their status."""
    stage = int(extra[1]) if extra else None
    return sum(r["variant"] == variant and r["world_size"] == world
               and (stage is None or r["task"].get("zero_stage") == stage) for r in ResultStore(runs).dicts())


def compare(out: Path, rates: list[str | None], repeats: int, models: list[Model], flat: bool = False) -> list[dict]:
    """Per model, rate and approach: each round's projection to 2 devices on 2 nodes from that round's one-host
    runs (no error widening: that is what the check measures), against that round's runs across the hosts; the
    line holds their medians over rounds, each round's error, and the measured window interval."""
    lines = []
    for rate in rates:
        try:
            far = project.between_nodes(out / f"link-{label(rate)}")
        except SpecError as missing:
            log.warning("%s: no projection (%s)", label(rate), missing)
            lines += [{"model": m.name, "rate": label(rate), "series": name, "not_projected": "the link was not measured"}
                      for m in models for name in m.approaches]
            continue
        for model in models:
            rounds: dict[str, list[tuple]] = {}
            for round_ in range(repeats):
                folder = round_folder(out, model, round_, flat)
                try:
                    result = project.folder(Folder.read(folder / "one-host"), counts=(2,), devices_per_node=1, far=far)
                except (SpecError, FileNotFoundError) as missing:
                    log.warning("%s, round %d: no projection (%s)", model.name, round_ + 1, missing)
                    continue
                runs = folder / f"two-host-{label(rate)}"
                measured = aggregate.configurations(frame(ResultStore(runs).dicts()), peak.load(runs))
                if not measured.empty:
                    measured = measured[(measured["status"] == "ok") & (measured["world_size"] == 2)]
                by_series = {line["key"].series: line for _, line in measured.iterrows()}
                for a in result["approaches"]:
                    [point] = result["table"][a.series]
                    rounds.setdefault(a.series, []).append((point, by_series.get(a.series), a.kind))
            for series, points in rounds.items():
                predicted = [p.throughput[0] for p, _, _ in points]
                got = [m for _, m, _ in points if m is not None]
                row = {"model": model.name, "parameters": model.parameters, "rate": label(rate), "series": series,
                       "kind": points[0][2], "link_busbw_gbps": far["all_reduce"].busbw / 1e9,
                       "link_alpha_us": far["all_reduce"].alpha_s * 1e6, "predicted": statistics.median(predicted),
                       "predicted_low": min(p.throughput[1] for p, _, _ in points),
                       "predicted_high": max(p.throughput[2] for p, _, _ in points),
                       "exposed_fraction": statistics.median(p.exposed_fraction for p, _, _ in points),
                       "rounds": len(points)}
                if got:
                    first = got[0]
                    stage = int(first["task.zero_stage"]) if present(first.get("task.zero_stage")) else None
                    folder = round_folder(out, model, 0, flat)
                    row["others_share"] = {
                        "two_hosts": others_share(folder / f"two-host-{label(rate)}", first["variant"], stage, 2),
                        "one_host": max((v for v in (others_share(folder / "one-host", first["variant"], stage, n)
                                                     for n in (1, 2)) if v is not None), default=None)}
                    medians = [float(m["throughput"]) for m in got]
                    row.update(measured=statistics.median(medians),
                               measured_low=min(float(m.get("ci_low", m["throughput"])) for m in got),
                               measured_high=max(float(m.get("ci_high", m["throughput"])) for m in got),
                               runs=len(got), error=statistics.median(predicted) / statistics.median(medians) - 1,
                               round_errors=[p.throughput[0] / float(m["throughput"]) - 1
                                             for p, m, _ in points if m is not None])
                lines.append(row)
    return lines


def others_share(runs: Path, variant: str, stage, world: int) -> float | None:
    """The share of its cores that other processes took while the approach ran there (the slot's busy share less
    its ranks' own, the worst rank of the worst node; bench's sampler, timeseries in the rows): a machine shared
    with other work slows a run that its projection's inputs did not see, or the reverse."""
    shares = []
    for folder in (runs, runs / "node1"):
        for row in ResultStore(folder).dicts() if folder.exists() else []:
            series = row.get("timeseries") or {}
            if (row["variant"], row["world_size"], row["task"].get("zero_stage")) != (variant, world, stage):
                continue
            own, busy = series.get("mean_cpu_pct") or [], series.get("mean_slot_busy_pct") or []
            shares += [max(0.0, b - o) / 100 for o, b in zip(own, busy) if o is not None and b is not None]
    return max(shares) if shares else None


def order_kept(lines: list[dict]) -> bool | None:
    """Whether the projection ranks the approaches of one model at one rate as the runs did: every pair whose
    measured intervals do not overlap in the same order (None: fewer than two measured)."""
    got = [line for line in lines if "measured" in line]
    if len(got) < 2:
        return None
    for a, b in itertools.combinations(got, 2):
        if a["measured_low"] > b["measured_high"] and not a["predicted"] > b["predicted"]:
            return False
        if b["measured_low"] > a["measured_high"] and not b["predicted"] > a["predicted"]:
            return False
    return True


def score(lines: list[dict], fitted: set[str]) -> dict:
    """The check split by construction: the error widening (what `bench project` fits on the check) from the
    `fitted` models' points alone, every figure of the verdict from the others' (held out). Per rate: the held-out
    MAPE, worst error, whether each model's order of the approaches is kept, and how many measured points the
    intervals widened by the fitted error hold."""
    for line in lines:
        line.setdefault("split", "fitted" if line["model"] in fitted else "held-out")
    fitted = {line["model"] for line in lines if line["split"] == "fitted"}
    scored = [line for line in lines if "error" in line]
    fit = [abs(line["error"]) for line in scored if line["split"] == "fitted"]
    widening = max(fit) if fit else 0.0
    held = [line for line in scored if line["split"] == "held-out"]
    for line in held:
        line["widened_low"] = line["predicted_low"] / (1 + widening)
        line["widened_high"] = line["predicted_high"] / (1 - min(widening, 0.99))
        line["inside"] = line["widened_low"] <= line["measured"] <= line["widened_high"]
    per_rate = {}
    for rate in dict.fromkeys(line["rate"] for line in lines if line["split"] == "held-out"):
        here = [line for line in held if line["rate"] == rate]
        errors = [abs(line["error"]) for line in here]
        orders = {m: order_kept([line for line in here if line["model"] == m])
                  for m in dict.fromkeys(line["model"] for line in here)}
        per_rate[rate] = {"points": len(here), "mape": statistics.mean(errors) if errors else None,
                          "worst": max(errors) if errors else None,
                          "order_kept": {m: kept for m, kept in orders.items() if kept is not None},
                          "inside_interval": sum(line["inside"] for line in here)}
    errors = [abs(line["error"]) for line in held]
    by_kind = {}
    for line in held:
        by_kind[line["kind"]] = max(by_kind.get(line["kind"], 0.0), abs(line["error"]))
    return {"fitted_models": sorted(fitted), "held_out_models": sorted({line["model"] for line in held}),
            "fitted_points": len(fit), "fitted_worst_error": widening, "held_out_points": len(held),
            "held_out_mape": statistics.mean(errors) if errors else None,
            "held_out_worst": max(errors) if errors else None, "held_out_worst_by_kind": by_kind,
            "slowest_link_gbps": min((line["link_busbw_gbps"] for line in held), default=None),
            "most_exposed_fraction": max((line["exposed_fraction"] for line in held), default=None),
            "per_rate": per_rate}


def machine() -> str:
    name = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                 if line.startswith("model name")), platform.processor())
    return f"{name}, {os.cpu_count()} logical CPUs"


def contended(share: dict | None) -> str:
    if not share:
        return "–"
    return " · ".join("–" if share.get(k) is None else f"{share[k]:.0%}" for k in ("one_host", "two_hosts"))


def write(out: Path, lines: list[dict], command: str, fitted: set[str]) -> None:
    stamp = datetime.now(timezone.utc).isoformat(timespec="seconds")
    scored = score(lines, fitted)
    (out / "check.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    held = [line for line in lines if line.get("split") == "held-out" and "error" in line]
    # What `bench project` widens its intervals by: the error on points nothing was fitted on.
    summary = {"worst_error": scored["held_out_worst"], "worst_error_by_kind": scored["held_out_worst_by_kind"],
               "configurations": len(held), "within_10_percent": sum(abs(line["error"]) <= 0.10 for line in held),
               "not_measured": sum("error" not in line for line in lines), **scored,
               "date": stamp, "machine": machine(), "command": command}
    (out / "error.json").write_text(json.dumps(summary, indent=1) + "\n")
    table = ["| model | link | approach | split | link all-reduce busbw | projected samples/s [interval] | "
             "measured samples/s [window interval] | projected / measured − 1 | in the interval widened by the "
             "fitted error | cores taken by other work: inputs · two hosts |", "|---|---|---|---|---|---|---|---|---|---|"]
    for line in lines:
        head = f"| {line['model']} | {line['rate']} | {line['series']} | {line.get('split', '–')} |"
        if "not_projected" in line:
            table.append(f"{head} – | not projected: {line['not_projected']} | – | – | – | – |")
            continue
        got = (f"{line['measured']:,.0f} [{line['measured_low']:,.0f}, {line['measured_high']:,.0f}]"
               if "measured" in line else "not measured")
        error = f"{line['error']:+.1%}" if "error" in line else "–"
        inside = ("–" if "inside" not in line else
                  f"{'yes' if line['inside'] else 'no'} [{line['widened_low']:,.0f}, {line['widened_high']:,.0f}]")
        table.append(f"{head} {line['link_busbw_gbps'] * 8e3:,.0f} Mbit/s | "
                     f"{line['predicted']:,.0f} [{line['predicted_low']:,.0f}, {line['predicted_high']:,.0f}] | "
                     f"{got} | {error} | {inside} | {contended(line.get('others_share'))} |")
    rates = ["| link | held-out points | MAPE | worst | order of the approaches kept | measured inside the widened "
             "interval |", "|---|---|---|---|---|---|"]
    for rate, r in scored["per_rate"].items():
        kept = ", ".join(f"{m}: {'yes' if k else 'no'}" for m, k in r["order_kept"].items()) or "–"
        rates.append(f"| {rate} | {r['points']} | " + (f"{r['mape']:.1%} | {r['worst']:.1%}" if r["points"] else
                                                       "– | –") + f" | {kept} | {r['inside_interval']} of {r['points']} |")
    verdict = (f"Held out: MAPE {scored['held_out_mape']:.1%}, worst {scored['held_out_worst']:.1%} over "
               f"{scored['held_out_points']} points; fitted (the widening only): worst {scored['fitted_worst_error']:.1%} "
               f"over {scored['fitted_points']}; {summary['not_measured']} not measured."
               if held else "No held-out point was measured.")
    (out / "check.md").write_text(
        f"# How far the projection holds on points it was not fitted to\n\n"
        f"{stamp} on {machine()}: `{command}`\n\n"
        f"**Fitted** (the only thing the projection takes from this check: the error its intervals are widened "
        f"by, here the fitted points' worst): {', '.join(scored['fitted_models']) or 'none'}, every rate. "
        f"**Held out** (scored, never fitted): {', '.join(scored['held_out_models']) or 'none'}, every rate. "
        "`bench project` widens by the held-out worst error (`error.json` worst_error), not the fitted.\n\n"
        "Each round, each model and approach ran on 1 and 2 slots of one host (`<model>/round-*/one-host/`, the "
        "projection's inputs, with the collectives on one host in `near-link/`) and at once across the two hosts at "
        "every link rate (`<model>/round-*/two-host-*/`); the link between the hosts was measured once a rate "
        "(`link-*/`). A line: the median over rounds of each round's projection from its own inputs (its interval: "
        "the corners of its inputs' ranges, not widened), against the median of what the rounds measured. Weak "
        "scaling, one rank and one core a host.\n\n## Held out, per link\n\n" + "\n".join(rates)
        + f"\n\n{verdict}\n\n## Every point\n\n" + "\n".join(table) + "\n")


def interrupted(signum, frame) -> None:
    """SIGINT and SIGTERM as Ctrl-C: the namespaces' clean-up runs on the way out."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/projection_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("results/projection-heldout-cpu"))
    parser.add_argument("--rates", default="50mbit,200mbit,1gbit,none",
                        help="link rates, tc's units; none: unshaped (default 50mbit,200mbit,1gbit,none)")
    parser.add_argument("--repeats", type=int, default=2, help="runs of each approach at each rate (default 2)")
    parser.add_argument("--models", default=",".join(MODELS),
                        help=f"the grid's models, of {', '.join(MODELS)} (default all)")
    parser.add_argument("--fitted", default="small-cnn",
                        help="the models whose points the error widening is fitted on; the others are held out and "
                             "scored (default small-cnn)")
    parser.add_argument("--approaches", default=",".join(EVERY),
                        help=f"the approaches run, of {', '.join(EVERY)} (default all, each where its model allows)")
    parser.add_argument("--score-only", action="store_true",
                        help="measure nothing: score what OUT holds (a point it lacks is reported not measured)")
    parser.add_argument("--fitted-check", type=Path,
                        help="an earlier check's folder of the default task (round-*/, link-*/): its points, projected "
                             "again, fitted on too")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    if not args.score_only and (why := netns.why_no_namespaces()):
        print(f"error: {why}: run it as root on Linux", file=sys.stderr)
        return 2
    rates = [None if r.strip() == "none" else r.strip() for r in args.rates.split(",") if r.strip()]
    for rate in rates:
        if rate:
            netns.bits_per_s(rate)
    for stop in (signal.SIGINT, signal.SIGTERM):  # SIGINT too: a background job starts with it ignored
        signal.signal(stop, interrupted)
    for option, names in (("--models", args.models), ("--fitted", args.fitted)):
        if unknown := [m for m in names.split(",") if m and m not in MODELS]:
            print(f"error: {option} {','.join(unknown)}: each one of {', '.join(MODELS)}", file=sys.stderr)
            return 2
    chosen = [a.strip() for a in args.approaches.split(",") if a.strip()]
    if unknown := [a for a in chosen if a not in EVERY]:
        print(f"error: --approaches {','.join(unknown)}: each one of {', '.join(EVERY)}", file=sys.stderr)
        return 2
    models = [dataclasses.replace(MODELS[m], approaches=tuple(a for a in MODELS[m].approaches if a in chosen))
              for m in args.models.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    if not args.score_only:
        measure(args.out, rates, args.repeats, models)
    lines = compare(args.out, rates, args.repeats, models)
    if args.fitted_check:
        lines += earlier(args.fitted_check)
    write(args.out, lines, "python benchmarks/projection_check.py " + " ".join(argv or sys.argv[1:]),
          {m for m in args.fitted.split(",") if m})
    print((args.out / "check.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
