"""Memory per rank: the bytes of model state each rank holds, and the device's peak after warm-up.

Model state is counted from the tensors' storages, each storage once (DDP's gradients are views into its
all-reduce buckets; an FSDP2 parameter is a DTensor whose local shard is what the rank holds): what
sharding (FSDP, ZeRO) saves shows here, independent of the allocator.
"""
from __future__ import annotations

import torch
from torch import nn


def _local(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor  # a DTensor: this rank's shard


def model_state_bytes(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, int]:
    """{"parameters", "gradients", "optimizer"}: bytes resident on this rank (gradients: after a step, before
    the next one clears them)."""
    seen: set[tuple[int, str]] = set()

    def stored(tensors) -> int:
        total = 0
        for tensor in tensors:
            storage = _local(tensor).untyped_storage()
            key = (storage.data_ptr(), str(tensor.device))
            if storage.nbytes() and key not in seen:
                seen.add(key)
                total += storage.nbytes()
        return total

    params = list(model.parameters())
    return {"parameters": stored(params),
            "gradients": stored(p.grad for p in params if p.grad is not None),
            "optimizer": stored(value for state in optimizer.state.values() for value in state.values()
                                if torch.is_tensor(value) and value.dim() > 0)}


def gpus(device: torch.device, every_visible: bool = False) -> list[int]:
    """The GPUs this process allocates on: its own, or every visible one (DataParallel drives them all).
    Counting only those keeps a stray allocation elsewhere from being read as another device's peak."""
    if device.type != "cuda":
        return []
    if every_visible:
        return list(range(torch.cuda.device_count()))
    return [device.index if device.index is not None else torch.cuda.current_device()]


def cap(device: torch.device, gib: float | None, every_visible: bool = False) -> None:
    """--device-memory on CUDA: the caching allocator refuses (OutOfMemoryError) past `gib` on each GPU this
    process allocates on, as a device of that size would. On a CPU the rank's own RLIMIT_DATA does it."""
    for index in gpus(device, every_visible) if gib else []:
        total = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, gib * 2**30 / total), index)


def reset_peak(device: torch.device, every_visible: bool = False) -> None:
    """At the end of warm-up: the peak from here on is the training's, not the first step's autotuning."""
    for index in gpus(device, every_visible):
        torch.cuda.reset_peak_memory_stats(index)


def device_peaks(device: torch.device, every_visible: bool = False) -> dict:
    """The CUDA caching allocator's peaks since warm-up (allocated: tensors; reserved: what it holds), the
    largest over this process's GPUs, and each one's allocated peak in index order: DataParallel's device 0
    also gathers the outputs; a rank of the other variants allocates on its own GPU only."""
    indexes = gpus(device, every_visible)
    if not indexes:
        return {}
    by_device = [torch.cuda.max_memory_allocated(i) / 2**20 for i in indexes]
    return {"peak_allocated_mb": max(by_device),
            "peak_reserved_mb": max(torch.cuda.max_memory_reserved(i) for i in indexes) / 2**20,
            "peak_allocated_mb_by_device": by_device}
