"""FLOPs of one training sample, counted by torch: `FlopCounterMode` around one forward and backward.

Counted on the meta device (shapes only: no memory, no compute, the same count) from a model built
the task's way, with the random state restored after, so that counting changes nothing in the run.
Multiply-add = 2 FLOPs; like torchtitan and nanoGPT's MFU, only matmuls and convolutions count
(norms, activations and the optimizer are not in the formula).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from bench.spec.task import TaskSpec
from torch_impl.model import build_model


def flops_per_sample(task: TaskSpec, batch: int = 2) -> float:
    """Forward + backward FLOPs per training sample of the task's model."""
    with torch.random.fork_rng(devices=[]):  # build_model seeds the generator: leave it as it was
        with torch.device("meta"):
            model = build_model(task)
            side, channels = task.input_shape  # what the model is fed (it resizes to the task's size itself)
            images = torch.empty(batch, channels, side, side)
            labels = torch.zeros(batch, dtype=torch.long)
        with FlopCounterMode(display=False) as counter:
            F.cross_entropy(model(images), labels).backward()
    return counter.get_total_flops() / batch
