"""The task's models in JAX: pure functions of a parameter tree, layer for layer the same as torch_impl.model
(NHWC, as XLA's CPU and GPU convolutions take it), initialised as torch initialises its layers
(uniform in +-1/sqrt(fan_in) for weights and biases: kaiming_uniform with a=sqrt(5))."""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp

from bench.spec import models
from bench.spec.task import TaskSpec


def _uniform(key, shape, fan_in: int):
    bound = 1.0 / math.sqrt(fan_in)
    return jax.random.uniform(key, shape, jnp.float32, -bound, bound)


def _conv(key, in_channels: int, out_channels: int, size: int) -> dict:
    kw, kb = jax.random.split(key)
    fan_in = in_channels * size * size
    return {"w": _uniform(kw, (size, size, in_channels, out_channels), fan_in), "b": _uniform(kb, (out_channels,), fan_in)}


def _dense(key, fan_in: int, out: int) -> dict:
    kw, kb = jax.random.split(key)
    return {"w": _uniform(kw, (fan_in, out), fan_in), "b": _uniform(kb, (out,), fan_in)}


def _apply_conv(layer: dict, x):
    y = jax.lax.conv_general_dilated(x, layer["w"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return y + layer["b"]


def _max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def small_cnn(key, channels: int, classes: int, image_size: int) -> dict:
    """Two 3x3 conv blocks and two dense layers (torch_impl.model.SmallCNN)."""
    keys = jax.random.split(key, 4)
    side = image_size // 4
    return {"conv1": _conv(keys[0], channels, 16, 3), "conv2": _conv(keys[1], 16, 32, 3),
            "fc1": _dense(keys[2], 32 * side * side, 64), "fc2": _dense(keys[3], 64, classes)}


def small_cnn_apply(params: dict, x):
    x = _max_pool(jax.nn.relu(_apply_conv(params["conv1"], x)))
    x = _max_pool(jax.nn.relu(_apply_conv(params["conv2"], x)))
    x = x.reshape(x.shape[0], -1)
    x = jax.nn.relu(x @ params["fc1"]["w"] + params["fc1"]["b"])
    return x @ params["fc2"]["w"] + params["fc2"]["b"]


BUILT_IN = {"small-cnn": (small_cnn, small_cnn_apply)}


def build_model(task: TaskSpec):
    """(parameters, apply(parameters, NHWC images) -> logits) for the task's model, initialised from its seed
    (identical on every process)."""
    name = task.model.name
    if name not in BUILT_IN:
        raise models.ModelNameError(f"{name}: JAX's approaches train the built-in {', '.join(BUILT_IN)} only "
                                    "(pick --model small-cnn, or a PyTorch or TensorFlow variant)")
    if task.input_shape != (task.model.image_size, task.model.channels):
        raise models.ModelNameError(f"{name} on JAX takes the dataset's own image size and channels: drop "
                                    "--image-size / --channels")
    init, apply = BUILT_IN[name]
    params = init(jax.random.key(task.recipe.seed), task.model.channels, task.model.classes, task.model.image_size)
    return params, apply


def count_parameters(params) -> int:
    return sum(int(leaf.size) for leaf in jax.tree_util.tree_leaves(params))


if __name__ == "__main__":  # the request's check (bench.run.model_check)
    import sys

    sys.exit(models.check_build(lambda task: build_model(TaskSpec.from_dict(task))[0], count_parameters,
                                sys.argv[1:]))
