"""Model-state bytes of one rank under ZeRO, read from the buffers DeepSpeed's optimizer keeps.

ZeRO flattens the parameters into one buffer per group (stage 1/2: the whole model on every rank; stage 3:
this rank's partition, the parameters themselves left empty between gathers), keeps an fp32 master copy of
this rank's partition (`master_weights`; stages 1/2 copy it even in fp32, stage 3 then reuses the
partition itself: each buffer is counted once), reduces the
gradients into this rank's partition during backward (the transient full gradients live in its buckets) and
frees them at the step: they are counted right after backward.
"""
from __future__ import annotations

import torch
from torch import nn


def tensor_bytes(*collections, seen: set | None = None) -> int:
    """Bytes of the tensors in (nested lists / dicts of) tensors, each buffer once (once across calls that
    share `seen`)."""
    seen, total = set() if seen is None else seen, 0

    def visit(item) -> None:
        nonlocal total
        if torch.is_tensor(item):
            if item.numel() and (item.data_ptr(), item.numel()) not in seen:
                seen.add((item.data_ptr(), item.numel()))
                total += item.numel() * item.element_size()
        elif isinstance(item, dict):
            for value in item.values():
                visit(value)
        elif isinstance(item, (list, tuple)):
            for value in item:
                visit(value)

    for collection in collections:
        visit(collection)
    return total


class ZeroState:
    def __init__(self, module: nn.Module, zero_optimizer, optimizer: torch.optim.Optimizer, stage: int):
        self.module, self.zero, self.optimizer, self.stage = module, zero_optimizer, optimizer, stage
        self.gradients: int | None = None

    def count_gradients(self) -> None:
        """Once, at the first step (warm-up, never timed): the partitions keep their size."""
        if self.gradients is not None:
            return
        self.gradients = tensor_bytes(getattr(self.zero, "averaged_gradients", None),
                                      [p.grad for p in self.module.parameters() if p.grad is not None])

    def bytes(self) -> dict[str, int | None]:
        if self.stage == 3:
            parameters = self.zero.fp16_partitioned_groups_flat
            master = self.zero.fp32_partitioned_groups_flat
        else:
            parameters, master = self.zero.bit16_groups_flat, self.zero.single_partition_of_fp32_groups
        states = [v for s in self.optimizer.state.values() for v in s.values() if torch.is_tensor(v) and v.dim() > 0]
        # ZeRO-3 in fp32 may keep no copy (its master partition is the parameters' buffer): counted once.
        seen: set = set()
        return {"parameters": tensor_bytes(parameters, seen=seen), "gradients": self.gradients,
                "optimizer": tensor_bytes(states, seen=seen), "master_weights": tensor_bytes(master, seen=seen)}
