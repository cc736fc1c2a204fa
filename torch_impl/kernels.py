"""Which kernels PyTorch will train with on this device: what the CPU offers, the instruction set ATen dispatches
to, oneDNN (mkldnn) and MKL, the BLAS it was built with, and on CUDA cuDNN, TF32, bf16 and NCCL. Recorded by
every rank when it joins (the row's environment["kernels"])."""
from __future__ import annotations

import re

import torch

from bench.worker.kernels import as_shipped, instruction_sets


def report(device: torch.device) -> dict:
    info = {"cpu_isa": instruction_sets(), "cpu_dispatch": torch.backends.cpu.get_cpu_capability(),
            "onednn": torch.backends.mkldnn.is_available() and bool(torch.backends.mkldnn.enabled),
            "mkl": torch.backends.mkl.is_available(), "blas": build_setting("BLAS_INFO"),
            "openmp": torch.backends.openmp.is_available(), "as_shipped": as_shipped()}
    if device.type == "cuda":
        info.update(cudnn=torch.backends.cudnn.version(), bf16=torch.cuda.is_bf16_supported(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())) if torch.distributed.is_nccl_available() else None)
    return info


def build_setting(name: str) -> str | None:
    """One NAME=value of torch's build configuration (`torch.__config__.show()`), e.g. BLAS_INFO=mkl."""
    found = re.search(rf"\b{name}=([^,\s]+)", torch.__config__.show())
    return found.group(1) if found else None
