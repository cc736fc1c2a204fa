"""A soak of random faults (issue 42): quick sweeps of several approaches, on one node and on two fake nodes, while a
seeded chaos driver picks a random process of the run (the harness, a launcher, a rank, the rendezvous store, the
run's watchdog) and a random fault (SIGKILL, SIGTERM, SIGINT, SIGSTOP held past the run's timeout) at a random
moment. After each trial:

- no process of the run is left (its run id in their environment, or its folder on their command line);
- the store parses: no torn line;
- the run has at most one row, and a row that is not `ok` says why;
- `sweep --resume` completes it, and the completed row trains to the same test loss and accuracy, to the last bit,
  as an undisturbed run of the same configuration.

    python benchmarks/soak.py --trials 200 --seed 1 --out results/soak-cpu

Appends a line per trial to OUT/trials.jsonl (a rerun with the same --out goes on from the trials it holds) and
writes OUT/summary.md. Not part of `make test`; tests/test_soak.py runs a short one."""
from __future__ import annotations

import argparse
import collections
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from bench import REPO_ROOT
from bench.run.processes import kill_all_of_run, processes_of_run

APPROACHES = ("torch-ddp", "torch-fsdp", "deepspeed", "lightning", "accelerate", "tf-multiworker")
# SIGSTOP costs a whole --timeout a trial: drawn half as often as each other fault.
FAULTS = ("SIGKILL", "SIGKILL", "SIGTERM", "SIGTERM", "SIGINT", "SIGINT", "SIGSTOP")
TARGETS = ("harness", "launcher", "rank", "store", "watchdog")
TIMEOUT_S = 40  # the run's --timeout: a stopped process is held past it
TASK = ("--task", "quick", "--epochs", "12")  # trains for seconds, not one: most faults land mid-training
CPU = {"CUDA_VISIBLE_DEVICES": ""}


def sweep(out: Path, variant: str, nodes: int, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bench", "sweep", *TASK, "--variants", variant,
                             "--devices", "2", "--nodes", str(nodes), "--no-analysis", "--timeout", str(TIMEOUT_S),
                             "--out", str(out), *extra], cwd=REPO_ROOT, env={**os.environ, **CPU},
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def run_id_of(out: Path) -> str | None:
    runs = sorted((out / "runs").glob("*")) if (out / "runs").exists() else []
    return runs[-1].name if runs else None


def role(pid: int) -> str | None:
    """What a process of the run is, by its command line."""
    try:
        command = " ".join(psutil.Process(pid).cmdline())
    except psutil.Error:
        return None
    if "bench.run.reaper" in command:
        return "watchdog"
    if "bench.run.rendezvous" in command:
        return "store"
    if "--spec" in command and ("_impl" in command or "probes." in command):
        return "rank"
    return "launcher"


def candidates(harness: subprocess.Popen, out: Path) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {"harness": [harness.pid]}
    run_id = run_id_of(out)
    for pid in processes_of_run(run_id) if run_id else []:
        if (kind := role(pid)) is not None:
            found.setdefault(kind, []).append(pid)
    return found


def left_of(out: Path, run_id: str | None, within_s: float = 15) -> list[str]:
    """The run's processes still alive after up to `within_s` (the watchdog's deadline), as 'pid command'."""
    deadline = time.monotonic() + within_s
    while True:
        pids = set(processes_of_run(run_id)) if run_id else set()
        for p in psutil.process_iter(["cmdline"]):
            if str(out) in " ".join(p.info["cmdline"] or []) and p.pid != os.getpid():
                pids.add(p.pid)
        alive = []
        for pid in pids:
            try:
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(f"{pid} {' '.join(process.cmdline())[:120]}")
            except psutil.Error:
                continue
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.3)


def torn_lines(path: Path) -> int:
    if not path.exists():
        return 0
    torn = 0
    for line in path.read_text(errors="replace").splitlines():
        try:
            torn += line.strip() != "" and not isinstance(json.loads(line), dict)
        except json.JSONDecodeError:
            torn += 1
    return torn


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def reference(out: Path, variant: str, nodes: int) -> dict:
    """An undisturbed run of the configuration: the figures a resumed sweep must reproduce."""
    folder = out / "reference" / f"{variant}-{nodes}"
    if not rows(folder / "results.jsonl"):
        sweep(folder, variant, nodes).communicate()
    ok = [r for r in rows(folder / "results.jsonl") if r["status"] == "ok"]
    if not ok:
        raise SystemExit(f"the undisturbed run of {variant} on {nodes} node(s) failed: see {folder}")
    return ok[-1]


def ended(process: subprocess.Popen, within_s: float, what: str) -> str:
    """Its stderr once it has ended; killed if it has not within `within_s` (which the stderr then says)."""
    try:
        return process.communicate(timeout=within_s)[1] or ""
    except subprocess.TimeoutExpired:
        process.kill()
        return (process.communicate()[1] or "") + f"\nsoak: {what} did not end within {within_s:.0f} s and was killed"


def trial(out: Path, number: int, rng: random.Random) -> dict:
    variant, nodes = rng.choice(APPROACHES), rng.choice((1, 2))
    target, fault, moment = rng.choice(TARGETS), rng.choice(FAULTS), round(rng.uniform(0.5, 10.0), 2)
    expected = reference(out, variant, nodes)
    folder = out / "trials" / f"{number:04d}"
    shutil.rmtree(folder, ignore_errors=True)
    harness = sweep(folder, variant, nodes)
    time.sleep(moment)
    pids, waited_until = [], time.monotonic() + 15  # a target not started yet: the fault when it is
    while harness.poll() is None and not pids and time.monotonic() < waited_until:
        pids = candidates(harness, folder).get(target, [])
        time.sleep(0.1 if not pids else 0)
    hit = rng.choice(pids) if pids else None
    try:
        if hit:
            os.kill(hit, getattr(signal, fault))
    except ProcessLookupError:
        hit = None
    if hit and fault == "SIGSTOP" and target == "harness":
        time.sleep(TIMEOUT_S + 5)  # the harness paused past its run's timeout, then let go
        os.kill(hit, signal.SIGCONT)
    err = ended(harness, TIMEOUT_S + 90, "the harness")
    run_id = run_id_of(folder)
    left = left_of(folder, run_id)
    if run_id:
        kill_all_of_run(run_id)  # whatever a failed check found, gone before the next trial
    store = folder / "results.jsonl"
    before = rows(store) if not torn_lines(store) else []
    unexplained = [r["run_id"] for r in before if r["status"] != "ok" and not r.get("error")]
    resumed = sweep(folder, variant, nodes, "--resume")
    resume_err = ended(resumed, TIMEOUT_S + 120, "the resumed sweep")
    after = [r for r in rows(store) if r["status"] == "ok"] if not torn_lines(store) else []
    matched = bool(after) and all(after[-1][k] == expected[k] for k in ("test_loss", "test_accuracy"))
    return {"trial": number, "variant": variant, "nodes": nodes, "target": target, "fault": fault,
            "moment_s": moment, "injected": hit is not None, "harness_exit": harness.returncode,
            "rows_before_resume": len(before), "statuses": [r["status"] for r in before],
            "unexplained": unexplained, "left": left, "torn": torn_lines(store), "resume_exit": resumed.returncode,
            "ok_rows_after_resume": len(after), "resume_matched": matched,
            "traceback": "Traceback" in err + resume_err, "hung": "and was killed" in err + resume_err}


def failed(t: dict) -> bool:
    return bool(t["left"] or t["torn"] or t["unexplained"] or t["rows_before_resume"] > 1 or not t["resume_matched"]
                or t["ok_rows_after_resume"] != 1 or t["resume_exit"] != 0 or t["traceback"] or t.get("hung"))


def summary(lines: list[dict], seed: int, command: str) -> str:
    injected = [t for t in lines if t["injected"]]
    by_kind = collections.Counter(f"{t['fault']} → {t['target']}" for t in injected)
    failures = [t for t in lines if failed(t)]
    table = "\n".join(f"| {kind} | {count} |" for kind, count in sorted(by_kind.items()))
    return (f"# Soak of random faults\n\n`{command}` (seed {seed})\n\n"
            f"- trials: {len(lines)}; a fault injected in {len(injected)} (in the others the target had exited "
            "before it was hit: they ran undisturbed)\n"
            f"- processes left after a trial: {sum(len(t['left']) for t in lines)}\n"
            f"- torn store lines: {sum(t['torn'] for t in lines)}\n"
            f"- rows without a reason: {sum(len(t['unexplained']) for t in lines)}\n"
            f"- resumes that completed the sweep with exactly one ok row: "
            f"{sum(t['ok_rows_after_resume'] == 1 and t['resume_exit'] == 0 for t in lines)} of {len(lines)}\n"
            f"- resumed runs with the undisturbed run's test loss and accuracy, to the bit: "
            f"{sum(t['resume_matched'] for t in lines)} of {len(lines)}\n"
            f"- tracebacks on the console: {sum(t['traceback'] for t in lines)}\n"
            f"- a harness or resumed sweep that did not end by itself: {sum(bool(t.get('hung')) for t in lines)}\n"
            f"- trials with any of these wrong: {len(failures)}"
            + (f" ({', '.join(str(t['trial']) for t in failures)}: see trials.jsonl)" if failures else "") + "\n\n"
            "| fault → target | injected |\n|---|---|\n" + table + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python benchmarks/soak.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=Path("results/soak-cpu"))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    record = args.out / "trials.jsonl"
    lines = rows(record)
    for number in range(len(lines), args.trials):  # each trial draws from its own seed: a rerun goes on
        line = trial(args.out, number, random.Random(f"{args.seed}-{number}"))
        with record.open("a") as f:
            f.write(json.dumps(line) + "\n")
        lines.append(line)
        print(json.dumps(line), flush=True)
        if not failed(line):  # a failure's folder is kept for its reproduction
            shutil.rmtree(args.out / "trials" / f"{number:04d}", ignore_errors=True)
    command = "python benchmarks/soak.py " + " ".join(argv if argv is not None else sys.argv[1:])
    (args.out / "summary.md").write_text(summary(lines, args.seed, command))
    print((args.out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
