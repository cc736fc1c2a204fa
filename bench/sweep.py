"""A sweep: variants x device counts, checked up front, run one after another into one store."""
from __future__ import annotations

import dataclasses
import logging
import time
from pathlib import Path

from bench import allreduce, data, launch, results
from bench.devices import Machine
from bench.launch import RunSpec
from bench.task import SpecError, TaskSpec
from bench.variants import Variant

log = logging.getLogger(__name__)


def device_counts(max_devices: int) -> list[int]:
    """1, 2, 4, ... up to max_devices, and max_devices itself."""
    if max_devices < 1:
        raise SpecError(f"devices must be at least 1 (got {max_devices})")
    counts, n = [], 1
    while n < max_devices:
        counts.append(n)
        n *= 2
    return counts + [max_devices]


def topology(devices: int, nodes: int) -> tuple[int, int]:
    """(nodes, devices per node) for a device count: split over `nodes` where it divides."""
    if nodes > 1 and devices >= nodes and devices % nodes == 0:
        return nodes, devices // nodes
    return 1, devices


def plan(variants: list[Variant], task: TaskSpec, device_type: str, counts: list[int], nodes: int = 1,
         cores_per_slot: int = 1, timeout_s: float = 900.0, analysis: bool = False,
         repeats: int = 1, engines: list[tuple[str, str | None]] = (("torchrun", None),),
         variants_named: bool = False) -> list[RunSpec]:
    """Runs in order: baselines first (efficiency needs them), each variant's counts ascending, and with
    `analysis` an independent (no gradient sync) run after each multi-device run that has one. With
    `repeats` the whole list runs that many times, round-robin, so that drifts of the machine spread
    over every configuration instead of hitting one."""
    if repeats < 1:
        raise SpecError(f"repeats must be at least 1 (got {repeats})")
    if nodes < 1:
        raise SpecError(f"nodes must be at least 1 (got {nodes})")
    if max(counts) % nodes:
        raise SpecError(f"GPUS={max(counts)} does not divide by NODES={nodes}: pick a multiple of {nodes}")
    specs = []
    for engine, address in engines:
        for variant in sorted(variants, key=lambda v: v.baseline is not None):
            if engine != "torchrun" and not variant.engine_entry and not variants_named:
                continue  # the default list under an engine: only what an engine can run (named: refused)
            for n in counts:
                if variant.max_devices is not None and n > variant.max_devices:
                    continue
                spec = RunSpec(variant, task, device_type, *topology(n, nodes), cores_per_slot=cores_per_slot,
                               timeout_s=timeout_s, engine=engine, engine_address=address)
                specs.append(spec)
                if analysis and variant.independent and n > 1:
                    specs.append(dataclasses.replace(spec, independent=True))
    return specs * repeats


def check_all(specs: list[RunSpec], machine: Machine) -> None:
    """Fail before anything starts: one bad run stops the whole sweep with its one-line error."""
    for spec in specs:
        if spec.inapplicable() is None:
            spec.check(machine)


def run_all(specs: list[RunSpec], out_dir: Path, machine: Machine,
            mlflow_uri: str | None = None) -> list[results.ResultRow]:
    check_all(specs, machine)
    if mlflow_uri:
        from bench import tracking

        tracking.require()
    store = results.ResultStore(out_dir)
    environment = results.environment()
    data_paths = {spec.task: data.prepare(spec.task) for spec in specs}
    rows, started = [], time.time()
    for index, spec in enumerate(specs, 1):
        elapsed = time.time() - started
        eta = elapsed / (index - 1) * (len(specs) - index + 1) if index > 1 else None
        log.info("[%d/%d] %s  (elapsed %.0fs%s)", index, len(specs), spec.label, elapsed,
                 f", ETA {eta:.0f}s" if eta is not None else "")
        reason = spec.inapplicable()
        if reason:
            row = launch.base_row(spec, launch.new_run_id(spec), "skipped", f"not applicable: {reason}")
            row.environment = environment
        else:
            row = launch.execute(spec, out_dir, machine, data_paths[spec.task], environment)
            launch.add_scaling(store, row, spec.variant)
        store.append(row)
        rows.append(row)
        if mlflow_uri:
            _track(mlflow_uri, row)
        log.info("      -> %s%s", row.status, f": {row.error.splitlines()[0]}" if row.error else "")
    return rows


def _track(uri: str, row: results.ResultRow) -> None:
    """After the row is stored: a tracking server that is down must not cost a measurement."""
    from bench import tracking

    try:
        tracking.log_row(uri, row)
    except Exception as exc:  # noqa: BLE001 - any tracking failure is a warning, not a lost run
        log.warning("      mlflow: could not log %s: %s", row.run_id, exc)


def measure_communication(rows: list[results.ResultRow], out_dir: Path, machine: Machine) -> None:
    """The all-reduce microbenchmark on every multi-device topology the torch backends ran on."""
    topologies = sorted({(r.device_type, r.nodes, r.devices_per_node) for r in rows
                         if r.status == "ok" and r.world_size > 1 and r.framework in ("torch", "accelerate")})
    for device_type, nodes, per_node in topologies:
        log.info("all-reduce microbenchmark: %s %dx%d", device_type, nodes, per_node)
        allreduce.measure(out_dir, machine, device_type, nodes, per_node)
