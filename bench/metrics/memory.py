"""Memory: the peaks a configuration reached (resident per rank; on CUDA allocated per device, device 0's and the
others'), folded over repeated runs as the largest: what must fit is the worst run. Its section: the model state
each rank holds against the same variant on one device, and a device 0 that peaks above the others."""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

from bench.metrics import Metric, Part, Ranks, Reads, fmt, present
from bench.metrics.blocks import Block, table_section, text
from bench.results.frame import records_of
from bench.spec.rank_record import Result
from bench.status import Status

if TYPE_CHECKING:
    import pandas as pd

DEVICE0_AHEAD = 0.10  # device 0's peak this far above every other device's is named under the table

# How each framework's allocator says it ran out: CUDA's caching allocator (past --device-memory, or the device's
# own), the CPU allocator under the rank's RLIMIT_DATA (ENOMEM), C++'s and Python's own, TensorFlow's.
ALLOCATION_REFUSED = re.compile(r"out of memory|OutOfMemoryError|can't allocate memory|Cannot allocate memory|"
                                r"std::bad_alloc|MemoryError|failed to allocate|RESOURCE_EXHAUSTED", re.IGNORECASE)
# The refused allocation's size: PyTorch's CPU allocator in bytes, its CUDA allocator in KiB, MiB or GiB.
_ASKED = (re.compile(r"tried to allocate (\d+) bytes", re.IGNORECASE),
          re.compile(r"Tried to allocate ([\d.]+) (KiB|MiB|GiB)"))


def refused_mb(error: str) -> float | None:
    """The size of the allocation an out-of-memory error names, in MiB (None where it names none)."""
    if found := _ASKED[0].search(error):
        return int(found.group(1)) / 2**20
    if found := _ASKED[1].search(error):
        return float(found.group(1)) * {"KiB": 2**-10, "MiB": 1, "GiB": 2**10}[found.group(2)]
    return None


def fold(ranks: Ranks) -> dict:
    """The largest resident or allocated peak of any rank, and the per-rank detail (`per_rank`)."""
    return {"peak_memory_mb": max(r.peak_memory_mb for r in ranks.results.values()),
            "memory": per_rank({rank: r.memory or {} for rank, r in ranks.results.items()})}


def per_rank(reported: dict[int, dict]) -> dict:
    """Every rank's model-state bytes (what sharding saves), the largest device peaks after warm-up, and each
    device's where there are several."""
    folded = {"model_state_bytes": {str(r): m["model_state_bytes"] for r, m in reported.items()
                                    if m.get("model_state_bytes")}}
    for peak in ("peak_allocated_mb", "peak_reserved_mb"):
        values = [m[peak] for m in reported.values() if m.get(peak) is not None]
        if values:
            folded[peak] = max(values)
    # Every device's peak, rank by rank: DataParallel's GPUs from its one process, else a device per rank.
    by_device = [mb for _, m in sorted(reported.items()) for mb in m.get("peak_allocated_mb_by_device") or []]
    if len(by_device) > 1:
        folded["peak_allocated_mb_by_device"] = by_device
    return folded if folded["model_state_bytes"] or len(folded) > 1 else {}


def fact(winner: dict) -> str | None:
    peak = winner.get("device_peak_mb")
    return f"{peak:,.0f} MiB per device" if present(peak) else None


def entries(configs: pd.DataFrame) -> list[dict]:
    """Configurations that counted their model state: per rank, against the same variant on one device."""
    records = [r for r in records_of(configs) if r["status"] == Status.OK and present(r["model_state_mb"])
               and not r["key"].independent and r["key"].input in ("memory", "synthetic")]
    by_key = {r["key"]: r for r in records}
    return [{"row": r, "of_one_device": r["model_state_mb"] / one["model_state_mb"]
             if (one := by_key.get(r["key"].one_device())) and one["model_state_mb"] else None} for r in records]


def table(found: list[dict]) -> pd.DataFrame:
    import pandas as pd

    body = [[e["row"]["series"], str(e["row"]["world_size"]), fmt(e["row"]["model_state_mb"], ".2f"),
             e["row"]["model_state_parts"] if present(e["row"]["model_state_parts"]) else "-",
             fmt(e["of_one_device"], ".2f"), fmt(e["row"]["device_peak_mb"], ",.0f"),
             fmt(e["row"]["throughput"], ",.0f")] for e in found]
    headers = ["variant", "devices", "model state / rank (MiB)", "params · grads · optimizer (rank 0)",
               "x one device's", "peak / device (MiB)", "throughput (samples/s)"]
    cells = pd.DataFrame(body, columns=headers)
    if any(present(e["row"]["device0_peak_mb"]) for e in found):
        cells.insert(6, "device 0 · others' largest (MiB)", [_device0_cell(e["row"]) for e in found])
    return cells


def _device0_cell(row: dict) -> str:
    if not present(row["device0_peak_mb"]):
        return "-"
    first, rest = row["device0_peak_mb"], row["other_devices_peak_mb"]
    ahead = round(first / rest - 1, 2) if rest else None
    return f"{first:,.0f} · {rest:,.0f}" + ("" if ahead is None else f" ({ahead:+.0%})" if ahead else " (±0%)")


def device0_lines(found: list[dict]) -> list[str]:
    """The configurations whose device 0 peaked well above the others: DataParallel's, which keeps the
    module and gathers the outputs and the loss there, so its device 0 bounds the batch it can hold."""
    return [f"{r['series']} on {r['world_size']} devices: device 0 peaked at {r['device0_peak_mb']:,.0f} MiB, "
            f"the others at most {r['other_devices_peak_mb']:,.0f} ({r['device0_peak_mb'] / r['other_devices_peak_mb'] - 1:+.0%}); "
            "the batch it can hold is bounded by device 0."
            for r in (e["row"] for e in found)
            if present(r["device0_peak_mb"]) and present(r["other_devices_peak_mb"]) and r["other_devices_peak_mb"] > 0
            and r["device0_peak_mb"] > (1 + DEVICE0_AHEAD) * r["other_devices_peak_mb"]]


def section(part: Part) -> list[Block]:
    held = entries(part.configs)
    return table_section("Memory per device", 3, (
        "Model state = the parameters, gradients and optimizer state resident on a rank, each storage "
        "counted once (an FSDP shard as the rank holds it; ZeRO's fp32 master copy of the rank's "
        "partition shown as + master and counted in the total; TensorFlow's gradients live only inside "
        "the step: -; tf-ps's state is on its parameter servers); x one device's = against the same variant on one device (sharding shows as "
        "< 1). Peak / device = the CUDA allocator's peak after warm-up, on a CPU the process's peak "
        "RSS (framework and data included); device 0 · others' largest (GPUs, several devices) = the first "
        "device's peak against the largest of the rest: DataParallel keeps the module and gathers the outputs on "
        "its device 0."), table(held) if held else None) + [text(line) for line in device0_lines(held)]


PEAKS = ("peak_memory_mb", "device_peak_mb", "device0_peak_mb", "other_devices_peak_mb")
METRIC = Metric("memory", fold=fold, reads=(Reads(Result, ("peak_memory_mb", "memory")),),
                row_fields=("peak_memory_mb", "memory"), figures=(*PEAKS, "model_state_mb", "model_state_parts"),
                repeats=tuple((c, "max") for c in PEAKS), fact=fact, section=section,
                notes=lambda configs: device0_lines(entries(configs)))
