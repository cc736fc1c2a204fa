"""The task's models in Keras, layer for layer the same as torch_impl.model."""
from __future__ import annotations

import math

from bench.spec.task import TaskSpec
from tf_impl import keras_flavour


def build_model(task: TaskSpec, keras=keras_flavour.keras):
    """The task's model, initialised from the task's seed, in this process's Keras (or the `keras` module
    given: --mlflow saves a Keras 3 copy of what Keras 2 trained). Inputs are normalised NHWC floats."""
    layers = keras.layers
    keras.utils.set_random_seed(task.seed)
    side, channels, classes = task.image_size, task.channels, task.classes
    inputs = keras.Input((side, side, channels))
    if task.model == "small-cnn":
        x = layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Flatten()(x)
        x = layers.Dense(64, activation="relu")(x)
    elif task.model == "mnist-cnn":
        x = layers.Conv2D(32, 3, activation="relu")(inputs)
        x = layers.Conv2D(64, 3, activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Dropout(0.25)(x)
        x = layers.Flatten()(x)
        x = layers.Dense(128, activation="relu")(x)
        x = layers.Dropout(0.5)(x)
    elif task.model == "resnet50":
        # Keras' ResNet-50 (v1.5-style strides differ from timm's; see README), without its classifier.
        backbone = keras.applications.ResNet50(weights=None, include_top=False, input_tensor=inputs, pooling="avg")
        x = backbone.output
    else:
        raise ValueError(f"unknown model {task.model!r}")
    # Logits in float32 even under a mixed-precision policy: the loss needs the range.
    outputs = layers.Dense(classes, dtype="float32")(x)
    return keras.Model(inputs, outputs, name=task.model)


def count_parameters(model) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))
