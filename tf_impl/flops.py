"""FLOPs of one training sample of a Keras model, counted from its layers' shapes (independently of
torch's counter, which a test holds it to).

The same rule as `torch.utils.flop_counter`: multiply-add = 2 FLOPs, only convolutions and dense
layers count. Forward: 2 x kernel size x output positions. Backward: the weight gradient (as much
again) and the input gradient (as much again), except for the first layer, whose input (the
images) needs no gradient.
"""
from __future__ import annotations

import math

from tf_impl.keras_flavour import keras


def flops_per_sample(model: keras.Model) -> float:
    total, first = 0.0, True
    for layer in _layers(model):
        # A depthwise kernel (h, w, channels, multiplier) counts as a full one: h x w x channels x multiplier.
        if isinstance(layer, (keras.layers.Conv2D, keras.layers.DepthwiseConv2D)):
            positions = math.prod(layer.output.shape[1:3])  # output height x width (NHWC)
        elif isinstance(layer, keras.layers.Dense):  # on an image (ConvNeXt's pointwise MLP): once per position
            positions = math.prod(layer.output.shape[1:-1])
        else:
            continue
        forward = 2 * math.prod(layer.kernel.shape) * positions
        total += forward + forward + (0 if first else forward)
        first = False
    return total


def _layers(model: keras.Model):
    """Every layer in order, nested models (a ResNet backbone) opened up."""
    for layer in model.layers:
        if isinstance(layer, keras.Model):
            yield from _layers(layer)
        else:
            yield layer
