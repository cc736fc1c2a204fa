"""PyTorch's fast-path choices the harness needs to know without importing torch. Standard library only."""
from __future__ import annotations

import os

# channels_last (NHWC in memory) per device type: PyTorch's fast path for convolutions on CUDA (tensor cores
# and cuDNN's fastest kernels want NHWC). On a CPU its gain comes and goes with the CPU: left off there, and
# measured on each machine by the fast-path audit (bench.studies.audit; docs/methodology.md#fast-paths-and---compile).
CHANNELS_LAST = {"cuda": True, "cpu": False}


def channels_last_chosen(device_type: str) -> bool:
    return CHANNELS_LAST[device_type]


# The CUDA switches of PyTorch's performance guide dtbench turns on, each with the variable ("1" on, "0" off) that
# the fast-path audit sets to measure it (bench.spec.variants.FAST_PATH_SWITCHES): cuDNN's autotuning for fixed
# shapes, TF32 for fp32 matmuls and convolutions, and the fused (single-kernel) optimizer step.
CUDA_SWITCHES = {"cudnn_benchmark": "DTBENCH_CUDNN_BENCHMARK", "tf32": "DTBENCH_TF32",
                 "fused_optimizer": "DTBENCH_FUSED_OPTIMIZER"}


def cuda_switch_chosen(device_type: str) -> bool:
    """dtbench's fast path turns every CUDA switch on, on CUDA only."""
    return device_type == "cuda"


def switch_on(name: str, device_type: str, shipped: bool) -> bool:
    """Whether CUDA switch `name` is on for this rank: the environment's word (the audit), else the fast path
    unless the run is --as-shipped."""
    chosen = os.environ.get(CUDA_SWITCHES[name])
    on = chosen == "1" if chosen in ("0", "1") else not shipped
    return on and cuda_switch_chosen(device_type)
