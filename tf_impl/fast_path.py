"""TensorFlow's fast path, chosen before TensorFlow is imported: what its performance guide recommends and the
harness sets in every TensorFlow process's environment. Standard library only (the harness imports it)."""
from __future__ import annotations

from bench.worker.kernels import is_x86

ONEDNN_ENV = "TF_ENABLE_ONEDNN_OPTS"


def environment(device_type: str) -> dict[str, str]:
    """oneDNN on for every x86 CPU, as TensorFlow's CPU performance guide recommends: TensorFlow turns it on by
    itself only with AVX-512 VNNI/BF16 or AMX, and on an AVX2-only CPU its Eigen kernels are the slower path
    (docs/methodology.md#fast-paths-and---compile). A GPU run's CPU-side ops take it too."""
    return {ONEDNN_ENV: "1"} if is_x86() else {}


def onednn_chosen(device_type: str) -> bool:
    return ONEDNN_ENV in environment(device_type)
