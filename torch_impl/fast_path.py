"""PyTorch's fast-path choices the harness needs to know without importing torch. Standard library only."""
from __future__ import annotations

# channels_last (NHWC in memory) per device type: PyTorch's fast path for convolutions on CUDA (tensor cores
# and cuDNN's fastest kernels want NHWC). On a CPU its gain comes and goes with the CPU: left off there, and
# measured on each machine by the fast-path audit (bench.studies.audit; docs/methodology.md#fast-paths-and---compile).
CHANNELS_LAST = {"cuda": True, "cpu": False}


def channels_last_chosen(device_type: str) -> bool:
    return CHANNELS_LAST[device_type]
