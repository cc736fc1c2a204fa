"""What the CPU offers the frameworks' kernels: the instruction sets their dispatch chooses between. Standard
library only: the harness and every rank read it (a rank records it beside its framework's own choices)."""
from __future__ import annotations

import os
import platform
from pathlib import Path

# Set by the harness for a run with --as-shipped: every framework on its own defaults, none of dtbench's switches.
AS_SHIPPED_ENV = "DTBENCH_AS_SHIPPED"
# 1 or 0: PyTorch's memory format, NHWC or NCHW, in place of the device's fast path (the fast-path audit's switch).
CHANNELS_LAST_ENV = "DTBENCH_CHANNELS_LAST"

# The x86 extensions the frameworks' CPU kernels dispatch on (oneDNN, MKL, PyTorch's ATen), lowest first.
X86_EXTENSIONS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile",
                  "amx_bf16", "amx_int8")
# TensorFlow 2.21 turns oneDNN on by itself only where one of these is present (tensorflow/core/util/util.cc):
# on an AVX2-only x86 CPU it runs its own Eigen kernels unless TF_ENABLE_ONEDNN_OPTS=1.
TF_ONEDNN_DEFAULT_ON = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16", "amx_int8")


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags as /proc/cpuinfo lists them (x86 "flags", Arm "Features")."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def instruction_sets(flags: set[str] | None = None) -> list[str]:
    """The vector extensions this CPU has, of those the kernels dispatch on ("avx2", "avx512f", ...)."""
    flags = cpu_flags() if flags is None else flags
    if is_x86():
        return [f for f in X86_EXTENSIONS if f in flags]
    return sorted(f for f in flags if f in ("asimd", "sve", "sve2", "bf16", "i8mm"))


def is_x86() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64", "i686")


def tf_onednn_on_by_default(flags: set[str] | None = None) -> bool:
    """Whether TensorFlow would use oneDNN here without being asked (x86 with AVX-512 VNNI/BF16 or AMX)."""
    flags = cpu_flags() if flags is None else flags
    return is_x86() and any(f in flags for f in TF_ONEDNN_DEFAULT_ON)


def as_shipped() -> bool:
    """This rank runs its framework as shipped (--as-shipped): no fast-path switch of dtbench's."""
    return os.environ.get(AS_SHIPPED_ENV) == "1"
