"""How close a run comes to the hardware: achieved FLOP/s, MFU against the data-sheet peak, and
the fraction of the peak measured on this machine (as torchtitan's and nanoGPT's MFU: FLOPs per
sample x samples per second per device / peak)."""
from __future__ import annotations


def achieved_flops(flops_per_sample: float | None, samples_per_s: float | None) -> float | None:
    if not flops_per_sample or not samples_per_s:
        return None
    return flops_per_sample * samples_per_s


def tflops(flops_per_sample: float | None, samples_per_s: float | None) -> float | None:
    achieved = achieved_flops(flops_per_sample, samples_per_s)
    return achieved / 1e12 if achieved else None


def fraction(flops_per_sample: float | None, per_device_samples_per_s: float | None,
             peak_flops: float | None) -> float | None:
    """Achieved FLOP/s of one device over a peak (None where either is unknown)."""
    achieved = achieved_flops(flops_per_sample, per_device_samples_per_s)
    return achieved / peak_flops if achieved and peak_flops else None
