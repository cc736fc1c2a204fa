"""Where sharding starts to pay: under a device memory budget (`--device-memory`), which approaches fit each model on
each device count, what they held, and the fastest of those that fit; with `bench maxbatch` run into the same
folder, the largest batch each one trains there. The verdict names the same (bench.analysis.verdict)."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from bench.analysis.verdict import name_in_group
from bench.metrics import fmt, present
from bench.metrics.blocks import Block, table_section
from bench.status import Status
from bench.results import maxbatch
from bench.results.frame import records_of


def entries(configs: pd.DataFrame) -> list[dict]:
    """The synchronous configurations run under a budget, by model (smallest first) and device count, the fastest
    first, those that did not fit last."""
    lines = [r for r in records_of(configs) if r["key"].device_memory and not r["key"].independent
             and r["status"] in (Status.OK, Status.DOES_NOT_FIT)]
    size = params_by_model(configs)
    return sorted(lines, key=lambda r: (size.get(r["model"], float("inf")), r["model"], r["world_size"],
                                        r["status"] != Status.OK,
                                        -(r["throughput"] or 0) if r["status"] == Status.OK else 0))


def largest_batches(directory: Path) -> dict[tuple[str, int], int | None]:
    """(series, world size) -> the largest global batch `bench maxbatch` found (the latest search of each)."""
    return {(s.get("series", ""), s["world_size"]): s["largest_fitting"] for s in maxbatch.load(directory / "maxbatch")}


def params_by_model(configs: pd.DataFrame) -> dict[str, float]:
    """Each model's parameter count as a run that fitted recorded it (one that did not fit never built it whole)."""
    found: dict[str, float] = {}
    for r in records_of(configs):
        if r["status"] == Status.OK and present(r.get("params")):
            found.setdefault(r["model"], r["params"])
    return found


def table(found: list[dict], params: dict[str, float], batches: dict) -> pd.DataFrame:
    def cells(r: dict) -> list[str]:
        fits, refused = r["status"] == Status.OK, r.get("memory.refused_allocation_mb")
        return [r["model"], fmt(params.get(r["model"], 0) / 1e6 or None, ".1f"), name_in_group(r), str(r["world_size"]),
                f"{r['key'].device_memory:g}", "yes" if fits else "no",
                fmt(r["model_state_mb"], ",.0f") if fits else "-", fmt(r["device_peak_mb"], ",.0f") if fits else "-",
                "-" if fits or not present(refused) else f"{refused:,.0f}", fmt(r["throughput"], ",.0f") if fits else "-",
                fmt(batches.get((r["series"], r["world_size"])), "d")]
    headers = ["model", "params (M)", "approach", "devices", "GiB / device", "fits", "model state / rank (MiB)",
               "peak / device (MiB)", "refused allocation (MiB)", "throughput (samples/s)", "largest batch"]
    return pd.DataFrame([cells(r) for r in found], columns=headers)


def section(configs: pd.DataFrame, directory: Path) -> list[Block]:
    found = entries(configs)
    return table_section("Which approaches fit the device memory", 3, (
        "Under --device-memory each rank had the memory of a smaller device (on CUDA the framework's own cap, on a "
        "CPU the rank process's RLIMIT_DATA, framework and data included). A run whose allocator refused it memory "
        "is recorded as does not fit, with the allocation refused; the others by speed, fastest first. Largest "
        "batch: `bench maxbatch` with the same budget into the same folder, where it ran."),
        table(found, params_by_model(configs), largest_batches(directory)) if found else None)
