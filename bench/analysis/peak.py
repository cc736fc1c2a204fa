"""The device's measured peak (`python -m bench peak`): large matmuls per precision on one device slot,
recorded in OUT/peak.jsonl beside the runs, and looked up for each row's `peak_fraction`."""
from __future__ import annotations

from pathlib import Path

from bench.analysis import microbench, utilisation
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.spec.task import get_task
from bench.spec.variants import Variant

PEAK = Variant("peak", "torch", "python", "torch_impl.peak", single_process=True, spans_nodes=False,
               summary="matmul peak microbenchmark")


def measure(out_dir: Path, machine: Machine, device_type: str, cores_per_slot: int = 1,
            timeout_s: float = 300) -> list[dict]:
    """Measure one device slot; append a row per precision to OUT/peak.jsonl and return them."""
    spec = RunSpec(PEAK, get_task("quick"), device_type, cores_per_slot=cores_per_slot, timeout_s=timeout_s)
    event = microbench.run(spec, "peak", out_dir, machine)
    if event is None:
        return []
    return microbench.append(out_dir / "peak.jsonl", [
        {"device_type": event["device_type"], "device_name": event["device_name"], "threads": event["threads"], **r}
        for r in event["results"]])


def load(out_dir: Path) -> list[dict]:
    return microbench.load(out_dir / "peak.jsonl")


def fraction_of(row: dict, table: list[dict]) -> float | None:
    """A row's per-device achieved FLOP/s over the measured peak of its device at its matmul precision."""
    if not row.get("matmul_precision"):
        return None
    threads = row.get("cores_per_slot") if row["device_type"] == "cpu" else None
    return utilisation.fraction(row.get("flops_per_sample"), row.get("per_device_throughput"),
                                measured_peak(table, row["device_type"], row.get("device_name"), threads,
                                              row["matmul_precision"]))


def measured_peak(table: list[dict], device_type: str, device_name: str | None, threads: int | None,
                  precision: str) -> float | None:
    """The latest measured FLOP/s of this device (on a CPU: a slot of this many cores) at `precision`."""
    for r in reversed(table):
        if (r["device_type"], r["precision"]) == (device_type, precision) and (
                r["threads"] == threads if device_type == "cpu" else r["device_name"] == device_name):
            return r["flops_per_s"]
    return None
