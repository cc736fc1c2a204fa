"""FLOPs of one training sample, counted by torch: `FlopCounterMode` around one forward and backward.

Counted on the meta device (shapes only: no memory, no compute, the same count) from a model built
the task's way, with the random state restored after, so that counting changes nothing in the run.
Multiply-add = 2 FLOPs; like torchtitan and nanoGPT's MFU, only matmuls and convolutions count
(norms, activations and the optimizer are not in the formula).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode, conv_flop_count

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
        with FlopCounterMode(display=False, custom_mapping={torch.ops.aten.convolution_backward: _conv_backward}
                             ) as counter:
            F.cross_entropy(model(images), labels).backward()
    return counter.get_total_flops() / batch


def _conv_backward(grad_out_shape, x_shape, w_shape, _bias, _stride, _padding, _dilation, transposed,
                   _output_padding, _groups, output_mask, out_shape, **_) -> int:
    """Each gradient of a convolution (its input's, its weight's) costs what the forward costs. torch's own
    formula counts a grouped convolution's weight gradient once per group: a depthwise one (EfficientNet,
    ConvNeXt, MobileNet) once per channel, 14 to 40 times the model's real FLOPs."""
    forward = conv_flop_count(x_shape, w_shape, grad_out_shape, transposed)
    return forward * (int(output_mask[0]) + int(output_mask[1]))
