"""Dense (no sparsity) peak FLOP/s of known accelerators per matmul precision, for MFU.

Sources: NVIDIA's data sheets — H100 Tensor Core GPU (SXM5, PCIe and NVL columns), H200 Tensor Core
GPU (SXM, NVL), A100 Tensor Core GPU (SXM4/PCIe), L4, L40, L40S, A10, V100, T4. The sheets print tensor-core
figures "with sparsity" for Ampere and later; the dense figure is half of that. fp32 is the
non-tensor-core rate; tf32 is what fp32 matmuls run at when TF32 is allowed (dtbench's CUDA fast path).
A CPU has no entry: its honest peak is the measured one (`python -m bench peak`).
"""
from __future__ import annotations

TERA = 1e12

# (a substring of the device name, checked in this order) -> TFLOP/s per precision.
DENSE_PEAKS_TFLOPS: tuple[tuple[str, dict[str, float]], ...] = (
    ("H100 PCIe", {"fp32": 51.2, "tf32": 378.0, "bf16": 756.0, "fp16": 756.0}),
    ("H100 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H100", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),        # SXM5
    ("H200 NVL", {"fp32": 60.0, "tf32": 417.5, "bf16": 835.5, "fp16": 835.5}),
    ("H200", {"fp32": 66.9, "tf32": 494.7, "bf16": 989.4, "fp16": 989.4}),        # SXM
    ("A100", {"fp32": 19.5, "tf32": 156.0, "bf16": 312.0, "fp16": 312.0}),        # SXM4 and PCIe
    ("L40S", {"fp32": 91.6, "tf32": 183.0, "bf16": 362.05, "fp16": 362.05}),
    ("L40", {"fp32": 90.5, "tf32": 90.5, "bf16": 181.05, "fp16": 181.05}),      # after L40S, before L4
    ("L4", {"fp32": 30.3, "tf32": 60.0, "bf16": 121.0, "fp16": 121.0}),
    ("A10G", {}),                                                                  # not the A10: unknown
    ("A10", {"fp32": 31.2, "tf32": 62.5, "bf16": 125.0, "fp16": 125.0}),
    ("V100", {"fp32": 15.7, "fp16": 125.0}),                                       # SXM2; no bf16, no tf32
    ("T4", {"fp32": 8.1, "fp16": 65.0}),
)


def matmul_precision(precision: str, tf32: bool) -> str:
    """The precision a run's matmuls execute in: its task precision, fp32 as tf32 where TF32 is allowed."""
    return "tf32" if precision == "fp32" and tf32 else precision


def dense_peak(device_name: str | None, precision: str) -> float | None:
    """FLOP/s of one device at `precision` (a matmul precision), None where the device is not known."""
    for pattern, peaks in DENSE_PEAKS_TFLOPS:
        if device_name and pattern in device_name:
            return peaks[precision] * TERA if precision in peaks else None
    return None
