"""How much does the harness cost? Per framework, its one-device run (torch-single, tf-single) against a plain
loop of that framework (probes/), and for a timm model also against timm's own train benchmark (the peer:
probes/timm_train.py), interleaved. The peer runs twice: with the task's optimizer (SGD with classic momentum,
the same work as the other sides) and as timm's benchmark ships (its "sgd" is Nesterov's, which costs an extra
pass over the parameters each step: 8 % of a ResNet-18 step on one core here).

Every side trains the same model, batch and data on the same pinned core(s) with the same thread count and
environment; each run is a fresh process. The sides rotate from pair to pair (A B C, B C A, ...) so that drifts
of a shared machine and order effects hit them alike. Each side is read with two statistics over the same timed
steps: the median of its windows (what dtbench reports) and the mean (its samples over the seconds of all its
windows together: what timm's benchmark.py reports), so that a gap between the two is seen, not hidden.
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
from bench.run.execute import execute, write_spec
from bench.run.launch import node_environment
from bench.run.runspec import RunSpec
from bench.spec import devices, frameworks, models
from bench.spec.task import SpecError, TaskSpec
from bench.spec.variants import FAST_PATH_SWITCHES, get_variant, load, overhead_pairs
from bench.status import Status
from bench.worker import data

log = logging.getLogger(__name__)
# A library model is measured as a new user tries it: 32-px colour images, made on the device, batch 32.
LIBRARY_MODEL_SETTINGS = {"image_size": 32, "channels": 3, "input": "synthetic", "global_batch": 32}
# At least timm's benchmark.py's warm-up (10 steps: TensorFlow's EfficientNet-B0 took 236 ms at step 2, 206-219 ms
# through step 9 and 200-205 ms after, probes/first_steps.py) and windows long enough that one hiccup of the machine
# does not decide a ratio: 8 windows of 10 steps (the quick task's own 5 of 4 did).
MIN_TIMING = {"warmup_steps": 10, "window_steps": 10, "windows": 8}
STATISTICS = ("median", "mean")
# The peer's sides: timm's optimizer names for the task's SGD (classic momentum) and for its benchmark's default.
PEER_OPTIMIZERS = {"peer": "momentum", "peer_as_shipped": "sgd"}
PEER_PRECISIONS = {"fp32": "float32", "bf16": "amp_bfloat16", "fp16": "amp"}


def overhead_task(task: TaskSpec, args: argparse.Namespace) -> TaskSpec:
    """The task as the study trains it: its timing at least MIN_TIMING (or as given), a library model at
    LIBRARY_MODEL_SETTINGS unless told otherwise, and as many epochs as the timed steps need."""
    given = {"warmup_steps": args.warmup_steps, "window_steps": args.window_steps, "windows": args.windows}
    timing = {k: given[k] or max(task.setting(k), v) for k, v in MIN_TIMING.items()}
    task = task.replace(**timing)
    if args.model and models.parse(args.model).library:
        defaults = {k: v for k, v in LIBRARY_MODEL_SETTINGS.items() if getattr(args, k, None) is None}
        task = task.replace(**defaults)
    task.validate()
    return task


def epochs_for_windows(task: TaskSpec, data_path: Path | None) -> int:
    """The fewest epochs that hold the warm-up and every window (a synthetic task trains them in one)."""
    timing = task.timing
    steps = timing.warmup_steps + timing.window_steps * timing.windows
    if task.synthetic or data_path is None:
        return 1
    per_epoch = len(data.load(data_path)["train_y"]) // task.recipe.global_batch
    return -(-steps // max(per_epoch, 1))


def frameworks_for(task: TaskSpec, asked: str) -> list[str]:
    """The frameworks whose pair runs: those asked for that build the model; none is a one-line refusal."""
    name = models.parse(task.model.name)
    builds = name.framework
    wanted = list(overhead_pairs()) if asked == "both" else [asked]
    # A model two frameworks pair (efficientnet_b0: timm's and Keras') is built by those with a paired library only.
    chosen = [f for f in wanted if builds in (None, f)
              and (name.source != "paired" or frameworks.registry()[f].paired_library)]
    if not chosen:
        raise SpecError(f"{task.model.name} is a {models.framework_name(builds)} model: run bench overhead with "
                        f"--framework {'torch' if builds == 'torch' else 'tensorflow'} (or --framework both)")
    return chosen


def peer_model(task: TaskSpec, framework: str) -> str | None:
    """timm's name of the model, where the peer (timm's train benchmark) builds it: PyTorch's side only."""
    name = models.parse(task.model.name)
    if framework != "torch" or name.source not in ("timm", "paired"):
        return None
    return name.library_name("torch")


def main(args: argparse.Namespace, task: TaskSpec, device_type: str) -> int:
    machine = devices.discover()
    if device_type == "cuda" and not machine.gpus:
        raise SpecError("--device-type cuda: no GPU here (nvidia-smi lists none): drop it to measure this CPU, or run "
                        "on a GPU machine")
    task = overhead_task(task, args)
    frameworks = frameworks_for(task, args.framework)
    data_path = data.prepare(task)
    task = task.replace(epochs=epochs_for_windows(task, data_path))
    results: dict[str, dict] = {f: {"pairs": []} for f in frameworks}
    for i in range(args.repeats):
        for framework in frameworks:  # the frameworks' pairs interleaved too: drift hits both alike
            pair = measure_pair(framework, task, machine, device_type, data_path, args, i)
            if pair is None:
                return 1
            results[framework]["pairs"].append(pair)
    args.out.mkdir(parents=True, exist_ok=True)
    for framework, summary in results.items():
        harness, plain = overhead_pairs()[framework]
        summary.update(summarise(summary["pairs"]), task=task.to_dict(), device_type=device_type,
                       cores_per_slot=args.cores_per_slot, harness=harness, plain_loop=plain,
                       peer="probes.timm_train" if peer_model(task, framework) else None)
        for line in describe(framework, summary):
            print(line)
    (args.out / "overhead.json").write_text(json.dumps(results, indent=1))
    return 0


def measure_pair(framework: str, task: TaskSpec, machine, device_type: str, data_path: Path | None, args: argparse.Namespace,
                 i: int) -> dict | None:
    """One round: the harness run, the plain loop and (a timm model on PyTorch) the peer, in rotated order."""
    variant, probe = overhead_pairs()[framework]
    spec = RunSpec(get_variant(variant), task, device_type, cores_per_slot=args.cores_per_slot,
                   timeout_s=args.timeout_s)
    placement = spec.check(machine)
    sides = ["harness", "plain"] + (list(PEER_OPTIMIZERS) if peer_model(task, framework) else [])
    shift = i % len(sides)
    measured = {}
    for side in sides[shift:] + sides[:shift]:
        run_dir = args.out / "plain" / f"{framework}-{side}{i}"
        if side == "harness":
            row = execute(spec, args.out, machine, data_path)
            if row.status != Status.OK:
                log.error("harness run failed: %s", row.error)
                return None
            rates = row.throughput["windows"]
            measured[side] = both_statistics(rates)
        elif side == "plain":
            result = run_probe([sys.executable, "-m", probe, "--spec"], spec, placement, run_dir, data_path, args.timeout_s)
            per_window = result["samples_per_window"]
            measured[side] = both_statistics([per_window / s for s in result["window_seconds"]])
        else:
            result = run_probe(peer_command(task, peer_model(task, framework), PEER_OPTIMIZERS[side], spec.device_type), spec,
                               placement, run_dir, data_path, args.timeout_s)
            measured[side] = peer_statistics(result, task)
    log.info("round %d (%s): %s", i + 1, framework,
             ", ".join(f"{side} {m['median']:.0f} (mean {m['mean']:.0f})" for side, m in measured.items()))
    return measured


def peer_command(task: TaskSpec, model: str, optimizer: str, device_type: str) -> list[str]:
    """The peer's command line for the task's work: model, batch, size, precision (bf16 as autocast, dtbench's) and
    memory format (channels_last where the harness's torch runs use it)."""
    timing = task.timing
    [switch] = [s for s in FAST_PATH_SWITCHES if s.name == "channels_last"]
    layout = ["--channels-last"] if load(switch.chosen)(device_type) else []
    return [sys.executable, "-m", "probes.timm_train", "--model", model, "--opt", optimizer, *layout,
            "--precision", PEER_PRECISIONS[task.recipe.precision], "--batch-size", str(task.recipe.global_batch),
            "--img-size", str(task.model.image_size), "--channels", str(task.model.channels),
            "--num-classes", str(task.model.classes), "--num-warm-iter", str(timing.warmup_steps),
            "--num-bench-iter", str(timing.window_steps * timing.windows),
            # the spec is the pinned cores' only carrier: the probe reads it for them
            "--spec"]


def run_probe(command: list[str], spec: RunSpec, placement: devices.Placement, run_dir: Path,
              data_path: Path | None, timeout_s: float) -> dict:
    """Run a probe in the environment a rank of `spec` gets (pinning, threads, malloc, fast path); its JSON."""
    run_dir.mkdir(parents=True, exist_ok=True)
    spec_path = write_spec(spec, placement, run_dir.name, run_dir, data_path)
    env = {**os.environ, **node_environment(spec, placement.nodes[0], run_dir.name, run_dir)}
    out = subprocess.run([*command, str(spec_path)], env=env, cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=timeout_s)
    if out.returncode != 0:
        raise RuntimeError(f"{command[2]} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def both_statistics(rates: list[float]) -> dict:
    """Windows of equal samples: the median of their rates, and the mean rate over all of them together
    (samples / total seconds: the harmonic mean of the rates)."""
    return {"median": statistics.median(rates), "mean": len(rates) / sum(1 / r for r in rates), "windows": rates}


def peer_statistics(result: dict, task: TaskSpec) -> dict:
    """The peer's own figure (timm's: samples over all timed steps), beside the median of the same steps cut
    into the task's windows."""
    steps, per = result["step_seconds"], task.timing.window_steps
    samples = task.recipe.global_batch * per
    rates = [samples / sum(steps[s:s + per]) for s in range(0, len(steps) - per + 1, per)]
    return {**both_statistics(rates), "mean": result["samples_per_sec"], "timm": result.get("timm")}


def summarise(pairs: list[dict]) -> dict:
    """Per statistic, the harness over each other side, per round: the ratios, their median and interval."""
    out = {}
    for other in ("plain", *PEER_OPTIMIZERS):
        if other not in pairs[0]:
            continue
        for stat in STATISTICS:
            ratios = [p["harness"][stat] / p[other][stat] for p in pairs]
            low, high, coverage = stats.median_interval(ratios)
            out[f"{other}:{stat}"] = {"ratios": ratios, "median": statistics.median(ratios), "ci": [low, high],
                                     "ci_coverage": coverage}
    return {"ratios": out}


def describe(framework: str, summary: dict) -> list[str]:
    lines = []
    names = {"plain": f"plain loop ({summary['plain_loop']})",
             "peer": "timm's train benchmark with the task's SGD (probes.timm_train --opt momentum)",
             "peer_as_shipped": "timm's train benchmark as shipped (its Nesterov SGD: other work)"}
    for key, r in summary["ratios"].items():
        other, stat = key.split(":")
        low, high = r["ci"]
        lines.append(f"{framework}: harness {summary['harness']} / {names[other]}, {stat} of windows" if stat == "median"
                     else f"{framework}: harness {summary['harness']} / {names[other]}, mean over the timed steps")
        lines[-1] += (f": {r['median']:.3f}, {r['ci_coverage']:.0%} CI [{low:.3f}, {high:.3f}] over "
                      f"{len(r['ratios'])} rounds ({', '.join(f'{x:.3f}' for x in r['ratios'])}; target 1 +- 0.03)")
    return lines
