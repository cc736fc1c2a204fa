"""The largest batch each approach can train on a device count, as timm's benchmark searches it: short probe
runs (synthetic input, a few steps) at growing global batches until one runs out of memory, then a bisection
down to one sample per device. Every probe is an ordinary run with its row; out-of-memory ends a probe, never
the search. The memory filled is the task's `device_memory_gib` where given (on a CPU, which has no device memory
of its own, it must be).
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from bench.results import ResultRow
from bench.results.maxbatch import SUMMARY
from bench.run.runspec import RunSpec
from bench.status import Status

log = logging.getLogger(__name__)



def out_of_memory(row: ResultRow) -> bool:
    """An allocator refused the probe memory, or (no budget given) the kernel's OOM killer ended a rank."""
    return row.status == Status.DOES_NOT_FIT or (row.status == Status.FAILED
                                                 and "killed by signal 9" in (row.error or ""))


@dataclass
class Search:
    """What a search found: the largest global batch that trained, the smallest that did not fit."""
    label: str
    world_size: int
    device_memory_gib: float | None
    series: str = ""  # the configuration as the report's tables name it, less the batch: where the result joins them
    largest_fitting: int | None = None
    smallest_failing: int | None = None
    probes: list[dict] = field(default_factory=list)
    error: str | None = None   # a probe that failed for another reason than memory ends the search

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def probe_spec(spec: RunSpec, global_batch: int) -> RunSpec:
    """A few steps on one synthetic batch made on the device: memory at the batch, not the input pipeline."""
    task = spec.task.replace(global_batch=global_batch, per_device_batch=None, scaling="strong", input="synthetic",
                             loader_workers=0, data_url=None, warmup_steps=2, window_steps=2, windows=1,
                             epochs=1, checkpoint_every_epoch=False)
    return dataclasses.replace(spec, task=task)


def search(spec: RunSpec, run: Callable[[RunSpec], ResultRow], max_batch: int, resolution: int = 1) -> Search:
    """Doubling from the task's per-device batch, then bisection until the gap between what fits and what does
    not is `resolution` samples a device: every batch a multiple of the world size."""
    world = spec.world_size
    found = Search(spec.key.label, world, spec.task.options.device_memory_gib, spec.key.series)

    def fits(per_device: int) -> bool | None:
        row = run(probe_spec(spec, per_device * world))
        memory = (row.memory or {}).get("peak_allocated_mb") or row.peak_memory_mb
        first_line = row.error.splitlines()[0] if row.error else None
        found.probes.append({"global_batch": per_device * world, "status": row.status, "run_id": row.run_id,
                             "peak_mb": memory, "out_of_memory": out_of_memory(row), "error": first_line})
        log.info("      batch %d: %s", per_device * world, "fits" if row.status == Status.OK else
                 "out of memory" if out_of_memory(row) else f"failed: {row.error}")
        if row.status == Status.OK:
            return True
        if out_of_memory(row):
            return False
        found.error = f"batch {per_device * world}: {row.status}: {first_line or ''}"
        return None

    cap = max_batch // world  # the largest per-device batch asked about
    low, high = 0, None  # per-device batches: `low` fits (0: none yet), `high` does not
    per_device = min(max(1, spec.task.recipe.global_batch // world), cap)
    while high is None:
        ok = fits(per_device)
        if ok is None:
            break
        if not ok:
            high = per_device
        elif per_device == cap:  # everything up to --max-batch fits
            low = per_device
            break
        else:
            low, per_device = per_device, min(per_device * 2, cap)
    while ok is not None and high is not None and high - low > max(1, resolution):
        middle = (low + high) // 2
        ok = fits(middle)
        if ok is not None:
            low, high = (middle, high) if ok else (low, middle)
    found.largest_fitting = low * world or None  # what fits stays known when a probe fails otherwise
    found.smallest_failing = high * world if high is not None else None
    return found


def record(found: Search, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / SUMMARY, "a") as summary:
        summary.write(json.dumps(found.to_dict()) + "\n")
