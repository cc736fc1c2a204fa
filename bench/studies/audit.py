"""The fast-path audit: for each framework, the switches that decide which kernels it trains with (TensorFlow's
oneDNN, PyTorch's memory format), each measured on this machine with the switch on and off, so that a reader sees
why a framework is where it is, and a setting dtbench chose that loses here is named.

Each side is a real run of the framework's plain single-device loop (its baseline variant) on the sweep's task
with synthetic input: the harness's launch, clock and fold, nothing of its own. The sides alternate on, off, off,
on so that a drift of the machine hits both alike. Measured once per machine (CPU, its instruction sets, the
libraries' versions) and kept in the dataset cache; a sweep copies the audit into its folder (fast_path.jsonl)."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import statistics
from pathlib import Path

from bench.results.fast_path import FILE
from bench.results.jsonl import append_line, read_jsonl
from bench.run import environment as env_info
from bench.run.execute import execute
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.spec.task import TaskSpec
from bench.spec.variants import FAST_PATH_SWITCHES, Switch, get_variant, load
from bench.status import Status
from bench.worker import cpu_model, data
from bench.worker.kernels import instruction_sets

log = logging.getLogger(__name__)

ORDER = ("1", "0", "0", "1")  # on, off, off, on: two runs a side, either side first once
AUDIT_WINDOWS = 5


def machine_fingerprint(device_type: str, cores_per_slot: int, task: TaskSpec, device_name: str | None) -> str:
    """What the audit's figures depend on: the CPU and its instruction sets, the device, the libraries, the task."""
    environment = env_info.environment()
    parts = [environment["cpu_model"], instruction_sets(), device_type, device_name, cores_per_slot, task.name,
             task.recipe.global_batch, task.recipe.precision, sorted(environment["libraries"].items())]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:16]


def audit(out_dir: Path, machine: Machine, device_type: str, task: TaskSpec, families: set[str],
          cores_per_slot: int = 1, again: bool = False) -> list[dict]:
    """Every switch of these families for this device type: from the cache when this machine measured it
    already (unless `again`), else measured now; written to OUT/fast_path.jsonl and returned."""
    cache, fingerprint = _cache(), _fingerprint(machine, device_type, task, cores_per_slot)
    known = {} if again else _known(cache, fingerprint)
    rows = []
    for switch in _switches(device_type, families):
        row = known.get(switch.name)
        if row is None:
            log.info("fast-path audit: %s, %s on and off", switch.family, switch.name)
            row = {"fingerprint": fingerprint, **measure(switch, out_dir / "audit", machine, device_type, task,
                                                         cores_per_slot)}
            append_line(cache, row)
        rows.append(row)
    (out_dir / FILE).unlink(missing_ok=True)
    for row in rows:
        append_line(out_dir / FILE, row)
    return rows


def _cache() -> Path:
    return data.cache_root() / "fast-path-audit.jsonl"


def _fingerprint(machine: Machine, device_type: str, task: TaskSpec, cores_per_slot: int) -> str:
    device_name = machine.gpu_names[0] if device_type == "cuda" and machine.gpu_names else None
    return machine_fingerprint(device_type, cores_per_slot, task, device_name)


def _switches(device_type: str, families: set[str]) -> list[Switch]:
    return [s for s in FAST_PATH_SWITCHES if device_type in s.device_types and s.family in families]


def _known(cache: Path, fingerprint: str) -> dict[str, dict]:
    return {r["switch"]: r for r in read_jsonl(cache) if r.get("fingerprint") == fingerprint}


def pending_runs(machine: Machine, device_type: str, task: TaskSpec, families: set[str],
                 cores_per_slot: int = 1) -> list[RunSpec]:
    """The runs `audit` will make now (every switch this machine has not measured yet), for the sweep's clock."""
    known = _known(_cache(), _fingerprint(machine, device_type, task, cores_per_slot))
    return [_side(switch, value, task, device_type, cores_per_slot)
            for switch in _switches(device_type, families) if switch.name not in known for value in ORDER]


def _side(switch: Switch, value: str, task: TaskSpec, device_type: str, cores_per_slot: int) -> RunSpec:
    """One side of a switch: its framework's plain single-device loop with the switch set, on synthetic input."""
    variant = get_variant(switch.variant)
    with_switch = dataclasses.replace(variant, env=variant.env + ((switch.env, value),))
    synthetic = task.replace(input="synthetic", loader_workers=0, data_url=None, windows=AUDIT_WINDOWS)
    return RunSpec(with_switch, synthetic, device_type, cores_per_slot=cores_per_slot, timeout_s=300)


def measure(switch: Switch, runs_dir: Path, machine: Machine, device_type: str, task: TaskSpec,
            cores_per_slot: int) -> dict:
    """One switch, on and off in ORDER: each run's median throughput, the on/off ratio of each pair."""
    side: dict[str, list[float]] = {"1": [], "0": []}
    errors = []
    for value in ORDER:
        row = execute(_side(switch, value, task, device_type, cores_per_slot), runs_dir, machine, None)
        if row.status == Status.OK and row.throughput:
            side[value].append(row.throughput["median"])
        else:
            errors.append(f"{switch.env}={value}: {(row.error or row.status).splitlines()[0]}")
    pairs = [on / off for on, off in zip(side["1"], side["0"])]
    # "framework" as a run's row records it: the distribution its variant names.
    return {"framework": get_variant(switch.variant).framework, "switch": switch.name, "variant": switch.variant,
            "env": switch.env, "device_type": device_type, "cores_per_slot": cores_per_slot, "task": task.name,
            "chosen": bool(load(switch.chosen)(device_type)), "on": side["1"], "off": side["0"],
            "ratio": statistics.median(pairs) if pairs else None,
            "ratio_low": min(pairs) if pairs else None, "ratio_high": max(pairs) if pairs else None,
            "errors": errors, "cpu_model": cpu_model(), "cpu_isa": instruction_sets()}


def summary_line(row: dict) -> str:
    """One switch's outcome in a line: its on/off ratio (the pairs' median and range) and dtbench's setting."""
    chosen = "on" if row["chosen"] else "off"
    if row["ratio"] is None:
        return f"{row['switch']}: not measured ({'; '.join(row['errors']) or 'no pair finished'})"
    return (f"{row['switch']} on/off {row['ratio']:.2f}x [{row['ratio_low']:.2f}, {row['ratio_high']:.2f}] "
            f"(dtbench runs it {chosen})")
