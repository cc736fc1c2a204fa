"""Memory: the peaks a configuration reached (resident per rank; on CUDA allocated per device, device 0's and the
others'), folded over repeated runs as the largest: what must fit is the worst run."""
from __future__ import annotations

from bench.metrics import Metric, present


def fact(winner: dict) -> str | None:
    peak = winner.get("device_peak_mb")
    return f"{peak:,.0f} MiB per device" if present(peak) else None


METRIC = Metric("memory", repeats=tuple((c, "max") for c in ("peak_memory_mb", "device_peak_mb", "device0_peak_mb",
                                                              "other_devices_peak_mb")), fact=fact)
