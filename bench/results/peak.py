"""The device's measured peak (`python -m bench peak`, measured by `bench.studies.microbench`): large
matmuls per precision on one device slot, in OUT/peak.jsonl, looked up for each row's `peak_fraction`."""
from __future__ import annotations

from pathlib import Path

from bench.results import utilisation
from bench.results.jsonl import read_jsonl

def load(out_dir: Path) -> list[dict]:
    return read_jsonl(out_dir / "peak.jsonl")


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
