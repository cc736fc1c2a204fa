"""The training recipe through torch's own API: `torch.optim` optimizers and `lr_scheduler`s, stepped
once per optimizer step.

The schedule is the task's (bench.spec.task): a linear warm-up (`LinearLR`) from
`warmup_start_factor x peak` to the peak, then constant, `StepLR` (x lr_gamma every lr_step_epochs) or
`CosineAnnealingLR` (to 0 at the last step), chained by `SequentialLR`. TensorFlow builds the same from
Keras schedules (tf_impl/recipe.py); a test holds the two equal step by step.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.optim import lr_scheduler

from bench.spec.task import TaskSpec


def make_optimizer(model: nn.Module, task: TaskSpec, fused: bool = False) -> torch.optim.Optimizer:
    """SGD with momentum, Adam or AdamW at the task's peak rate (the scheduler scales it per step).
    weight_decay is torch's: an L2 term in the gradient for SGD and Adam, decoupled for AdamW. `fused`: the
    whole step in one CUDA kernel (the GPU fast path; the same arithmetic)."""
    lr, decay = task.recipe.lr * task.recipe.lr_scale, task.recipe.weight_decay
    kernel = {"fused": True} if fused else {}
    if task.recipe.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=lr, weight_decay=decay, **kernel)
    if task.recipe.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=decay, **kernel)
    return torch.optim.SGD(model.parameters(), lr=lr, momentum=task.recipe.momentum, weight_decay=decay, **kernel)


def make_scheduler(optimizer: torch.optim.Optimizer, task: TaskSpec, steps_per_epoch: int,
                   epochs: int) -> lr_scheduler.LRScheduler:
    """The task's schedule over `epochs` x `steps_per_epoch` optimizer steps."""
    total, warmup = epochs * steps_per_epoch, task.lr_warmup_steps(steps_per_epoch)
    if task.recipe.schedule == "step":
        main = lr_scheduler.StepLR(optimizer, step_size=task.recipe.lr_step_epochs * steps_per_epoch,
                                   gamma=task.recipe.lr_gamma)
    elif task.recipe.schedule == "cosine":
        main = lr_scheduler.CosineAnnealingLR(optimizer, T_max=max(1, total - warmup))
    else:
        main = lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    if not warmup:
        return main
    start = lr_scheduler.LinearLR(optimizer, start_factor=task.warmup_start_factor, end_factor=1.0,
                                  total_iters=warmup)
    return lr_scheduler.SequentialLR(optimizer, [start, main], milestones=[warmup])
