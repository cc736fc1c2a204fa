"""`bench gpu-check`: what a lent GPU machine is for, in one call of a few minutes (issue 52's one-GPU check).

Each PyTorch approach trains ResNet-50 (timm's, 224 px, bf16, batch 256, synthetic input) on one GPU with short
timing; then the CUDA memory cap of --device-memory (a run that fits, one that does not), NVML power and energy per
image, dtbench against a plain loop and timm's own train benchmark (`bench overhead`), torch.compile against eager,
the GPU fast-path audit, and TensorFlow where its GPU build is installed.

Each step is a `python -m bench ...` process with a time limit of its own, run most telling first. The whole check
has a budget: a step that would not fit in what is left of it by its estimate is recorded as skipped for lack of
time, as is a step whose package this machine lacks (a lent box has torch and timm, not always DeepSpeed, Lightning
or TensorFlow): one line each, never a traceback. One folder named after the GPU gets every row, each step's
output, a JSON summary and a README listing each step's command, status, seconds and key figure. The harness side
imports no framework: the GPU is found by nvidia-smi (bench.spec.devices).
"""
from __future__ import annotations

import argparse
import functools
import importlib.metadata
import importlib.util
import json
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from bench.interrupt import Interrupted
from bench.results.fast_path import FILE as FAST_PATH_FILE
from bench.results.jsonl import RESULTS, read_jsonl
from bench.spec import devices, options
from bench.spec import frameworks
from bench.spec.task import SpecError
from bench.spec.variants import FAST_PATH_SWITCHES, GPU_CHECK_RUNS, get_variant
from bench.status import Status

DEFAULT_BUDGET_S = 480.0  # a lent box gives 15 minutes of device time, its start included: room for one rerun
# The workload GPU users know (timm's benchmark.py --bench train, MLPerf's model): set in full on every run, so
# that a changed preset does not change the check.
RESNET50 = ("--task", "resnet50", "--image-size", "224", "--precision", "bf16", "--global-batch", "256")
# Start-up (15-20 s a run) dominates at this timing: three windows give a median and its spread, enough to say that
# an approach trains at about the speed of the others, not to rank them.
SHORT_TIMING = ("--windows", "3")
ONE_WINDOW = ("--windows", "1")
# --device-memory: ResNet-50 at batch 256 in bf16 peaked at 11 GiB on an H100 (results/reference-h100-resnet50),
# so twice that fits and 2 GiB does not hold its activations.
FITS_GIB, DOES_NOT_FIT_GIB = 24, 2
# The peer check exactly as issue 52 states it; `bench overhead` interleaves its sides itself.
PEER = ("overhead", "--model", "timm:resnet50", "--framework", "torch", "--device-type", "cuda", "--image-size", "224",
        "--channels", "3", "--input", "synthetic", "--global-batch", "256", "--precision", "bf16", "--repeats", "2",
        "--windows", "4")
# Two rounds of four ResNet-50 processes (dtbench, a plain loop, timm's measurement with dtbench's SGD and as timm
# ships it), each 10 warm-up steps and 4 windows of 10 (about 5 s at 2,800 images/s) after 15 s of start-up.
PEER_ESTIMATE_S = 160.0
RUN_LIMIT_S = 180.0      # one approach's run, cold caches and DeepSpeed's imports included
MEMORY_LIMIT_S = 120.0   # one window; the run that does not fit ends at its first step
COMPILE_LIMIT_S = 420.0  # Inductor compiles ResNet-50's forward and backward from a cold cache
AUDIT_RUN_S, AUDIT_RUN_LIMIT_S = 28.0, 150.0  # one side of a switch (bench.studies.audit: 5 windows)
# bench's own start and its table around a run's --timeout, so that the run's own limit fires first and is recorded.
LAUNCH_SLACK_S = 30.0
GRACE_S = 20.0  # after SIGTERM, a step records its run in flight as interrupted; then it is killed
# dtbench's own dependencies (pyproject.toml): without them every run fails, so the check refuses up front instead.
# Two aside: without nvidia-ml-py the rows have no GPU samples, and without pyarrow (a 40 MB wheel to carry) the
# runs go unsampled (--sample-every 0, the time series' file is Parquet); the energy step is skipped either way.
HARNESS_NEEDS = ("numpy", "pandas", "scipy", "tabulate", "matplotlib", "psutil")
SAMPLES_NEED = "pyarrow"
# The frameworks whose variants start in an interpreter of their own (TensorFlow's GPU build: .venv-tf): their
# approaches are a group of the check of their own, looked for in that interpreter.
OWN_INTERPRETER = tuple(f.name for f in frameworks.registry().values() if f.venv)
# What a machine that runs dtbench has working (a framework with an interpreter of its own: there): their
# requirements are not looked for, only those of what was carried to it.
SHIPPED = ("timm", *frameworks.names())
GROUPS = ("approaches", "energy", "memory", "peer", "compile", "audit", *OWN_INTERPRETER, "report")
SUMMARY, LOGS = "gpu-check.json", "gpu-check-logs"
PASSED = ("ok", "skipped")


@dataclass(frozen=True)
class Step:
    """One thing the check does: a `python -m bench` command (or a reading of what earlier steps wrote)."""
    name: str
    group: str                 # what --only names (GROUPS)
    argv: tuple[str, ...]      # after `python -m bench`; () for a step that reads the folder
    estimate_s: float          # on one H100
    limit_s: float             # the step's own time limit
    needs: tuple[str, ...] = ()  # distributions or modules this machine must have
    judge: str = "row"         # how its outcome is read (JUDGES)
    expect: Status = Status.OK  # the status of its row that passes
    about: str = ""            # what a step without a command does


@dataclass
class Outcome:
    name: str
    group: str
    status: str     # ok | failed | timeout | skipped | interrupted
    seconds: float
    figure: str     # the key figure, or why not
    command: str
    finished_at: str = ""


@dataclass(frozen=True)
class Finished:
    """What a step's process left: its exit status (None: killed), its output, whether it ran past its limit."""
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False


def baseline() -> str:
    """The plain loop: the first approach checked, which the memory-cap, energy and compile steps run too."""
    return GPU_CHECK_RUNS[0][0]


def plan(out: Path, sampled: bool = True) -> list[Step]:
    """Every step, most telling first; `sampled`: the runs' time series can be written (their power and energy)."""
    plain, to = baseline(), ("--device-type", "cuda", *(() if sampled else ("--sample-every", "0")), "--out", str(out))
    approaches, apart = [], []
    for name, fields, extra, estimate in GPU_CHECK_RUNS:
        variant, label = get_variant(name), options.label(name, fields)
        on_its_own = variant.family in OWN_INTERPRETER
        flags = [part for field, value in fields.items() for part in (options.every_option()[field].flag, str(value))]
        argv = ("run", "--variant", name, *flags, *RESNET50, *SHORT_TIMING, "--timeout", f"{RUN_LIMIT_S:.0f}", *to)
        needs = (variant.family,) if on_its_own else (variant.framework, "timm", *extra)
        (apart if on_its_own else approaches).append(
            Step(f"{name} ({label})" if label else name, variant.family if on_its_own else "approaches", argv,
                 estimate, RUN_LIMIT_S + LAUNCH_SLACK_S, needs))
    torch_needs = ("torch", "timm")

    def capped(gib: int) -> tuple[str, ...]:
        return ("run", "--variant", plain, *RESNET50, *ONE_WINDOW, "--device-memory", str(gib),
                "--timeout", f"{MEMORY_LIMIT_S:.0f}", *to)

    first, *other_approaches = approaches
    steps = [
        first,
        # What the lent box is for first: the peer check, then eager against compiled; the other approaches after.
        Step("peer check: plain loop and timm's train benchmark", "peer", (*PEER, "--out", str(out / "overhead")),
             PEER_ESTIMATE_S, 420.0, torch_needs, judge="peer"),
        Step("torch.compile", "compile", ("run", "--variant", plain, "--compile", *RESNET50, *SHORT_TIMING,
                                          "--timeout", f"{COMPILE_LIMIT_S:.0f}", *to),
             90.0, COMPILE_LIMIT_S + LAUNCH_SLACK_S, (*torch_needs, "triton"), judge="compile"),
        *other_approaches,
        Step("power and energy per image", "energy", (), 0.0, 0.0, ("pynvml", SAMPLES_NEED), judge="energy",
             about=f"reads the {plain} row above: the GPU's mean power (NVML) and joules per image in steady state"),
        Step(f"memory cap: fits in {FITS_GIB} GiB", "memory", capped(FITS_GIB), 25.0,
             MEMORY_LIMIT_S + LAUNCH_SLACK_S, torch_needs),
        Step(f"memory cap: does not fit in {DOES_NOT_FIT_GIB} GiB", "memory", capped(DOES_NOT_FIT_GIB), 20.0,
             MEMORY_LIMIT_S + LAUNCH_SLACK_S, torch_needs, expect=Status.DOES_NOT_FIT),
    ]
    switches = [s for s in FAST_PATH_SWITCHES if "cuda" in s.device_types and s.family not in OWN_INTERPRETER]
    if switches:  # each switch on, off, off, on (bench.studies.audit.ORDER)
        audited = switches[0].family if len({s.family for s in switches}) == 1 else "both"
        steps.append(Step(f"fast-path audit ({', '.join(s.name for s in switches)})", "audit",
                          ("audit", "--framework", audited, *RESNET50, "--again", *to),
                          4 * AUDIT_RUN_S * len(switches), 4 * AUDIT_RUN_LIMIT_S * len(switches), torch_needs,
                          judge="audit"))
    return [*steps, *apart, Step("report", "report", ("report", str(out)), 20.0, 120.0, judge="output")]


def select(steps: list[Step], only: str | None) -> list[Step]:
    """The steps --only names (groups or steps' names, comma-separated); all without it."""
    if not only:
        return steps
    wanted = [w.strip() for w in only.split(",") if w.strip()]
    known = set(GROUPS) | {s.name for s in steps}
    if unknown := [w for w in wanted if w not in known]:
        raise SpecError(f"--only {', '.join(unknown)}: name groups ({', '.join(GROUPS)}) or steps as the dry run "
                        "lists them")
    return [s for s in steps if s.group in wanted or s.name in wanted]


def command(step: Step, python: str = sys.executable) -> list[str]:
    return [python, "-m", "bench", *step.argv] if step.argv else []


@functools.cache
def installed(name: str) -> bool:
    """Whether this machine has `name`: a distribution or a module of this Python; a framework with an interpreter
    of its own in that interpreter (bench.spec.frameworks)."""
    if name in OWN_INTERPRETER:
        return frameworks.get(name).installed()
    try:
        importlib.metadata.distribution(name)
        return True
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        return importlib.util.find_spec(name.replace("-", "_")) is not None
    except (ImportError, ValueError):
        return False


@functools.cache
def requirements(name: str) -> tuple[str, ...]:
    """What an installed distribution requires without condition: a wheel carried to the lent box without its own
    dependencies (DeepSpeed's hjson, ninja ...) is a skip that names them, not a failed run."""
    try:
        listed = importlib.metadata.requires(name) or []
    except importlib.metadata.PackageNotFoundError:
        return ()
    found = (re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", req) for req in listed if ";" not in req)
    return tuple(dict.fromkeys(m.group(1) for m in found if m))


def skip_reason(step: Step, left_s: float, available: Callable[[str], bool],
                requires: Callable[[str], tuple[str, ...]] = requirements) -> str | None:
    """Why the step will not run (None: it runs): a package missing here, or too little of the budget left."""
    missing = [n for n in step.needs if not available(n)]
    missing += [f"{n}'s {r}" for n in step.needs if n not in missing and n not in SHIPPED
                for r in requires(n) if not available(r)]
    if missing:
        return f"{', '.join(missing)} not installed here"
    if left_s <= 0 or step.estimate_s > left_s:
        return f"no time left: about {step.estimate_s:.0f} s needed, {max(left_s, 0):.0f} s of the budget left"
    return None


def forecast(steps: list[Step], budget_s: float, available: Callable[[str], bool]) -> list[str | None]:
    """Each step's skip reason if every step took its estimate: what the budget covers."""
    spent, reasons = 0.0, []
    for step in steps:
        reasons.append(reason := skip_reason(step, budget_s - spent, available))
        spent += 0.0 if reason else step.estimate_s
    return reasons


def run_steps(steps: list[Step], out: Path, budget_s: float, available: Callable[[str], bool] = installed,
              clock: Callable[[], float] = time.monotonic, run: Callable[..., Finished] | None = None,
              recorded: Callable[[list[Outcome]], None] = lambda outcomes: None) -> list[Outcome]:
    """Each step in order within the budget; `recorded` gets the outcomes so far after each (a killed check
    leaves its record). A stop signal ends the step in flight, recorded as interrupted, and is raised on."""
    run = run or run_command
    started, outcomes = clock(), []
    for index, step in enumerate(steps, 1):
        left = budget_s - (clock() - started)
        text = shlex.join(command(step))
        if reason := skip_reason(step, left, available):
            outcomes.append(Outcome(step.name, step.group, "skipped", 0.0, reason, text, _now()))
            print(f"[{index}/{len(steps)}] {step.name}: skipped, {reason}", flush=True)
        else:
            limit = min(step.limit_s, left) if step.argv else 0.0
            print(f"[{index}/{len(steps)}] {step.name} (about {step.estimate_s:.0f} s"
                  + (f", at most {limit:.0f} s)" if step.argv else ")"), flush=True)
            began, before = clock(), len(read_jsonl(out / RESULTS))
            try:
                finished = run(command(step), limit, out / LOGS / f"{slug(step.name)}.log") if step.argv else None
            except Interrupted as stop:
                outcomes.append(Outcome(step.name, step.group, "interrupted", round(clock() - began, 1), str(stop),
                                        text, _now()))
                recorded(outcomes)
                raise
            status, figure = judge(step, out, finished, read_jsonl(out / RESULTS)[before:], limit)
            outcomes.append(Outcome(step.name, step.group, status, round(clock() - began, 1), figure, text, _now()))
            print(f"      -> {status} in {outcomes[-1].seconds:.0f} s: {figure}", flush=True)
        recorded(outcomes)
    return outcomes


def judge(step: Step, out: Path, finished: Finished | None, rows: list[dict], limit_s: float) -> tuple[str, str]:
    """(status, key figure or why not) of a step that ran, from its process and the rows it appended."""
    if finished is not None and finished.timed_out:
        recorded = " (its run in flight recorded as interrupted)" if rows else ""
        return "timeout", f"stopped at its limit of {limit_s:.0f} s{recorded}"
    return JUDGES[step.judge](step, out, finished, rows)


def _judge_row(step: Step, out: Path, finished: Finished, rows: list[dict]) -> tuple[str, str]:
    if not rows:  # refused before it started (one line and exit 2), or bench itself failed
        return "failed", last_line(finished.stderr) or f"exit {finished.returncode} without a row"
    row = rows[-1]
    if row["status"] == step.expect:
        return "ok", row_figure(row)
    if row["status"] == Status.OK:  # a run expected not to fit trained under the cap
        return "failed", f"trained under the cap, which did not hold: {row_figure(row)}"
    return (("timeout" if row["status"] == Status.TIMEOUT else "failed"),
            f"{row['status']}: {last_line(row.get('error'))}")


def _judge_compile(step: Step, out: Path, finished: Finished, rows: list[dict]) -> tuple[str, str]:
    status, figure = _judge_row(step, out, finished, rows)
    if status != "ok":
        return status, figure
    row, eager = rows[-1], baseline_row(out)
    compiled = row["throughput"]["median"]
    ratio = f", {compiled / rate:.2f}x eager's {rate:,.0f}" if eager and (rate := eager["throughput"]["median"]) else ""
    # a compiled run's first step is its compile time (bench.metrics.timing), out of every window
    took = f"; compiling took {row['first_step_s']:.0f} s" if row.get("first_step_s") is not None else ""
    return "ok", f"{compiled:,.0f} images/s compiled{ratio}{took}"


def _judge_energy(step: Step, out: Path, finished: None, rows: list[dict]) -> tuple[str, str]:
    row = baseline_row(out)
    if row is None:
        return "failed", f"no ok {baseline()} row in the folder to read: its step did not pass"
    series = row.get("timeseries") or {}
    if not series.get("gpu_mean_power_w"):
        return "failed", f"the {baseline()} row has no GPU samples: NVML gave none (its run's log says why)"
    energy = series.get("energy_j_per_sample")
    per_image = f", {energy:.3f} J per image" if energy is not None else ", no steady-state energy per image"
    return "ok", (f"{sum(series['gpu_mean_power_w']):.0f} W mean over the run{per_image} at "
                  f"{row['throughput']['median']:,.0f} images/s ({series.get('gpu_energy_j', 0):,.0f} J in all)")


def _judge_output(step: Step, out: Path, finished: Finished, rows: list[dict]) -> tuple[str, str]:
    if finished.returncode != 0:
        return "failed", last_line(finished.stderr) or f"exit {finished.returncode}"
    return "ok", last_line(finished.stdout) or "done"


def _judge_peer(step: Step, out: Path, finished: Finished, rows: list[dict]) -> tuple[str, str]:
    status, figure = _judge_output(step, out, finished, rows)
    if status != "ok":
        return status, figure
    try:
        return "ok", peer_figure(json.loads((out / "overhead" / "overhead.json").read_text()))
    except (OSError, ValueError, KeyError, TypeError, IndexError, ZeroDivisionError, statistics.StatisticsError):
        return "ok", figure  # its own last line, where its summary file reads otherwise


def _judge_audit(step: Step, out: Path, finished: Finished, rows: list[dict]) -> tuple[str, str]:
    from bench.studies.audit import summary_line

    # `bench audit` exits 1 with its file written when a side failed (its errors in the file), else it stopped early.
    wrote = finished.returncode in (0, 1) and "fast_path.jsonl" in last_line(finished.stdout)
    switches = read_jsonl(out / FAST_PATH_FILE) if wrote else []
    if not switches:
        return "failed", last_line(finished.stderr) or f"exit {finished.returncode} without the audit's file"
    return ("ok" if finished.returncode == 0 else "failed"), "; ".join(map(summary_line, switches))


JUDGES = {"row": _judge_row, "compile": _judge_compile, "energy": _judge_energy, "output": _judge_output,
          "peer": _judge_peer, "audit": _judge_audit}


def row_figure(row: dict) -> str:
    if row["status"] == Status.DOES_NOT_FIT:
        refused = (row.get("memory") or {}).get("refused_allocation_mb")
        asked = f": an allocation of {refused:,.0f} MiB refused" if refused else ""
        return f"does not fit in {row['task'].get('device_memory_gib'):g} GiB{asked}"
    rate = (row.get("throughput") or {}).get("median")
    parts = [f"{rate:,.0f} images/s" if rate else "no throughput"]
    if row.get("peak_memory_mb"):
        parts.append(f"peak {row['peak_memory_mb']:,.0f} MiB")
    if gib := row["task"].get("device_memory_gib"):
        parts.append(f"under a {gib:g} GiB cap")
    return ", ".join(parts)


def peer_figure(summary: dict) -> str:
    """dtbench's rate and its ratios to the plain loop and to timm's measurement, from overhead.json."""
    torch = summary["torch"]
    rate = statistics.median(pair["harness"]["median"] for pair in torch["pairs"])
    parts = [f"dtbench {rate:,.0f} images/s"]
    for key, words in (("peer:mean", "/ timm's benchmark with dtbench's SGD (its mean over the timed steps)"),
                       ("peer_as_shipped:mean", "/ timm's benchmark as shipped (Nesterov SGD)"),
                       ("plain:median", "/ plain loop (median of windows)")):
        if ratio := torch["ratios"].get(key):
            parts.append(f"{words} {ratio['median']:.3f} [{ratio['ci'][0]:.3f}, {ratio['ci'][1]:.3f}]")
    return "; ".join(parts)


def baseline_row(out: Path) -> dict | None:
    """The plain loop's last ok eager row without a memory cap: what energy and compile are read against."""
    found = [r for r in read_jsonl(out / RESULTS) if r.get("variant") == baseline() and r.get("status") == Status.OK
             and not (r.get("task") or {}).get("device_memory_gib") and not (r.get("task") or {}).get("compile")
             and (r.get("throughput") or {}).get("median")]
    return found[-1] if found else None


def last_line(text: str | None) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def run_command(cmd: list[str], limit_s: float, log: Path) -> Finished:
    """One step's process, its output kept in `log`. Past its limit it gets SIGTERM, so that bench records the run
    in flight as interrupted and stops its processes, then SIGKILL after GRACE_S."""
    log.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    timed_out = False
    try:
        try:
            stdout, stderr = proc.communicate(timeout=max(limit_s, 1.0))
        except subprocess.TimeoutExpired:
            timed_out = True
            stdout, stderr = _stop(proc, signal.SIGTERM)
    except Interrupted as stop:
        # Ctrl-C reached the step's process with ours (one process group); another signal is passed on.
        stdout, stderr = _stop(proc, None if stop.signum == signal.SIGINT else stop.signum)
        _write_log(log, cmd, stdout, stderr)
        raise
    _write_log(log, cmd, stdout, stderr)
    return Finished(proc.returncode, stdout, stderr, timed_out)


def _stop(proc: subprocess.Popen, signum: int | None) -> tuple[str, str]:
    if signum is not None:
        proc.send_signal(signum)
    try:
        return proc.communicate(timeout=GRACE_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()


def _write_log(log: Path, cmd: list[str], stdout: str | None, stderr: str | None) -> None:
    log.write_text(f"$ {shlex.join(cmd)}\n{stdout or ''}\n--- stderr ---\n{stderr or ''}")


def render_plan(steps: list[Step], out: Path, budget_s: float, gpu: str | None,
                available: Callable[[str], bool] = installed) -> str:
    """The dry run: every step on one line with its estimate, limit and full command, then what the budget covers."""
    where = gpu or "no GPU here: what a GPU machine would run"
    lines = [f"gpu-check: {len(steps)} steps into {out} ({where}), most telling first, within a {budget_s:.0f} s "
             "budget"]
    if missing := [n for n in HARNESS_NEEDS if not available(n)]:
        lines.append(f"this Python lacks {', '.join(missing)} (dtbench's own dependencies): the check would refuse")
    reasons = forecast(steps, budget_s, available)
    for index, (step, reason) in enumerate(zip(steps, reasons), 1):
        what = shlex.join(command(step)) if step.argv else step.about
        limit = f", at most {step.limit_s:.0f} s" if step.argv else ""
        lines.append(f"{index:2}. [{step.group}] {step.name}: about {step.estimate_s:.0f} s{limit}: {what}"
                     + (f"  [skipped: {reason}]" if reason else ""))
    total = sum(s.estimate_s for s in steps)
    covered = sum(s.estimate_s for s, r in zip(steps, reasons) if r is None)
    timed_out = [s.name for s, r in zip(steps, reasons) if r and r.startswith("no time")]
    lines.append(f"estimated on one H100: {total:.0f} s ({total / 60:.1f} min) for every step; by these estimates "
                 f"the budget runs {sum(r is None for r in reasons)} of {len(steps)} steps in {covered:.0f} s"
                 + (f" and skips for lack of time: {', '.join(timed_out)} (--budget SECONDS for more, or "
                    "--only GROUPS to run them in a second call)" if timed_out else ""))
    return "\n".join(lines)


def default_out(gpu: str | None) -> Path:
    return Path("results") / f"gpu-check-{slug(gpu) if gpu else 'GPU-NAME'}"


def write_folder(out: Path, outcomes: list[Outcome], header: dict) -> None:
    """gpu-check.json (the outcomes as data) and README.md (them as a table), rewritten after every step."""
    out.mkdir(parents=True, exist_ok=True)
    (out / SUMMARY).write_text(json.dumps({**header, "steps": [asdict(o) for o in outcomes]}, indent=1))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("ok", "failed", "timeout", "skipped", "interrupted")}
    tally = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    lines = [f"# gpu-check: one {header['gpu']}", "",
             f"`{header['command']}` on {header['started_at']}, commit `{header['git_sha']}`, Python "
             f"`{header['python']}`: each PyTorch approach on one GPU, the CUDA memory cap, power and energy, the peer "
             "check against timm's train benchmark, torch.compile and the fast-path audit, on ResNet-50 (timm, 224 px, "
             f"bf16, batch 256, synthetic input), within a budget of {header['budget_s']:.0f} s. {tally}; "
             f"{sum(o.seconds for o in outcomes):.0f} s of steps.", "",
             "| # | step | status | seconds | key figure | command |", "|---|---|---|---|---|---|"]
    for index, o in enumerate(outcomes, 1):
        earlier = f" (call of {o.finished_at})" if o.finished_at and o.finished_at < header["started_at"] else ""
        cell = f"`{o.command}`" if o.command else "-"
        lines.append(f"| {index} | {o.name} | {o.status}{earlier} | {o.seconds:.0f} | {o.figure.replace('|', '/')} | "
                     f"{cell} |")
    for title, statuses in (("Skipped", ("skipped",)), ("Failed", ("failed", "timeout", "interrupted"))):
        named = [f"- {o.name}: {o.figure}" for o in outcomes if o.status in statuses]
        lines += ["", f"## {title}", "", *named] if named else []
    lines += ["", "## Files", "",
              f"`results.jsonl` (one row per run; its `command` re-runs it), `runs/` (each run's spec, logs and time "
              f"series), `{LOGS}/` (each step's output), `overhead/` (the peer check's rows and `overhead.json`), "
              f"`{FAST_PATH_FILE}` (the audit), `{SUMMARY}` (this table as data), `report.md` (`bench report`)."]
    (out / "README.md").write_text("\n".join(lines) + "\n")


def earlier_outcomes(out: Path, leaving_out: set[str]) -> dict[str, Outcome]:
    """The folder's outcomes of the steps this call leaves out (--only), kept beside this call's."""
    try:
        steps = json.loads((out / SUMMARY).read_text())["steps"]
        return {o["name"]: Outcome(**o) for o in steps if o["name"] in leaving_out}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def merged(full_plan: list[Step], now: list[Outcome], earlier: dict[str, Outcome]) -> list[Outcome]:
    """This call's outcomes and the earlier ones of the steps it leaves out, in plan order."""
    fresh = {o.name: o for o in now}
    return [found for step in full_plan if (found := fresh.get(step.name) or earlier.get(step.name))]


def main(args: argparse.Namespace) -> int:
    machine = devices.discover()
    gpu = machine.gpu_names[0] if machine.gpus else None
    out = args.out or default_out(gpu)
    full_plan = plan(out, sampled=installed(SAMPLES_NEED))
    steps = select(full_plan, args.only)
    if args.dry_run:
        print(render_plan(steps, out, args.budget, gpu))
        return 0
    if gpu is None:
        raise SpecError("no GPU here (nvidia-smi lists none): gpu-check runs on a GPU machine; "
                        "`make gpu-check ARGS=--dry-run` prints what it would run")
    if missing := [n for n in HARNESS_NEEDS if not installed(n)]:
        raise SpecError(f"this Python lacks {', '.join(missing)} (dtbench's own dependencies, pyproject.toml): "
                        "carry them along, or drop SETUP=none")
    from bench import REPO_ROOT
    from bench.run.environment import git_sha

    asked = [*(["--budget", f"{args.budget:g}"] if args.budget != DEFAULT_BUDGET_S else []),
             *(["--only", args.only] if args.only else []), *(["--out", str(args.out)] if args.out else [])]
    header = {"gpu": gpu, "gpus_visible": len(machine.gpus), "command": shlex.join(["python", "-m", "bench",
                                                                                     "gpu-check", *asked]),
              "started_at": _now(), "git_sha": git_sha(REPO_ROOT), "python": sys.executable, "budget_s": args.budget}
    earlier = earlier_outcomes(out, {s.name for s in full_plan} - {s.name for s in steps})
    print(f"gpu-check on {gpu}: {len(steps)} steps into {out}, within {args.budget:.0f} s", flush=True)

    def record(outcomes: list[Outcome]) -> None:
        write_folder(out, merged(full_plan, outcomes, earlier), header)

    outcomes = run_steps(steps, out, args.budget, recorded=record)
    bad = [o for o in outcomes if o.status not in PASSED]
    print(f"gpu-check: {sum(o.status == 'ok' for o in outcomes)} ok, {len(bad)} failed or stopped, "
          f"{sum(o.status == 'skipped' for o in outcomes)} skipped; {out / 'README.md'}")
    return 1 if bad else 0
