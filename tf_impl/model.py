"""The task's models in Keras, layer for layer the same as torch_impl.model."""
from __future__ import annotations

import math

from bench.spec import models
from bench.spec.task import TaskSpec
from tf_impl import keras_flavour


def build_model(task: TaskSpec, keras=keras_flavour.keras):
    """The task's model, initialised from the task's seed, in this process's Keras (or the `keras` module
    given: --mlflow saves a Keras 3 copy of what Keras 2 trained): a built-in one, a `keras.applications` model
    or the user's own (bench.spec.models), with random weights. Inputs are normalised NHWC floats as the input
    pipeline hands them; where their size or channels differ from the task's (a bundled dataset at
    --image-size / --channels), the first layers resize them on the device."""
    layers = keras.layers
    keras.utils.set_random_seed(task.recipe.seed)
    side, channels, classes = task.model.image_size, task.model.channels, task.model.classes
    name = models.parse(task.model.name)
    if name.source in ("keras", "paired"):
        return _resized(keras, task, _application(keras, name.library_name("tensorflow"), side, channels,
                                                  classes, task.model.head_dropout))
    if name.source == models.OWN:
        return _resized(keras, task, _own(keras, name.name, channels, classes, side))
    if not name.builtin:
        raise models.ModelNameError(f"{task.model.name} is a {name.source} model: TensorFlow's approaches train keras: "
                                    "and built-in models")
    inputs = keras.Input((side, side, channels))
    if task.model.name == "small-cnn":
        x = layers.Conv2D(16, 3, padding="same", activation="relu")(inputs)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Conv2D(32, 3, padding="same", activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Flatten()(x)
        x = layers.Dense(64, activation="relu")(x)
    elif task.model.name == "mnist-cnn":
        x = layers.Conv2D(32, 3, activation="relu")(inputs)
        x = layers.Conv2D(64, 3, activation="relu")(x)
        x = layers.MaxPooling2D(2)(x)
        x = layers.Dropout(0.25)(x)
        x = layers.Flatten()(x)
        x = layers.Dense(128, activation="relu")(x)
        x = layers.Dropout(0.5)(x)
    elif task.model.name == "databricks-cnn":
        x = layers.Conv2D(10, 5)(inputs)
        x = layers.ReLU()(layers.MaxPooling2D(2)(x))
        x = layers.SpatialDropout2D(0.5)(layers.Conv2D(20, 5)(x))
        x = layers.ReLU()(layers.MaxPooling2D(2)(x))
        x = layers.Flatten()(x)
        x = layers.Dense(50, activation="relu")(x)
        x = layers.Dropout(0.5)(x)
    else:  # resnet50
        # Keras' ResNet-50 (v1.5-style strides differ from timm's; see README), without its classifier.
        backbone = keras.applications.ResNet50(weights=None, include_top=False, input_tensor=inputs, pooling="avg")
        x = backbone.output
    # Logits in float32 even under a mixed-precision policy: the loss needs the range.
    outputs = layers.Dense(classes, dtype="float32")(x)
    return _resized(keras, task, keras.Model(inputs, outputs, name=task.model.name))


def _application(keras, name: str, side: int, channels: int, classes: int, dropout: float = 0.0):
    """A keras.applications model with random weights, the task's input shape and classes, float32 logits: its
    backbone pooled, then (`dropout`) a Dropout, then the classifier, as timm builds its head."""
    build = getattr(keras.applications, name, None)
    if not callable(build) or not name[:1].isupper():
        raise models.ModelNameError(f"keras:{name}: keras {keras.__version__} has no such application (the "
                                    "constructors of keras.applications, e.g. keras:EfficientNetB0)")
    try:
        backbone = build(weights=None, include_top=False, input_shape=(side, side, channels), pooling="avg")
    except ValueError as exc:  # e.g. a minimum input size, or 3 channels only
        raise models.ModelNameError(f"keras:{name}: {str(exc).splitlines()[0]} (--image-size, --channels)") from None
    x = keras.layers.Dropout(dropout)(backbone.output) if dropout else backbone.output
    outputs = keras.layers.Dense(classes, dtype="float32")(x)
    return keras.Model(backbone.input, outputs, name=name)


def _own(keras, target: str, channels: int, classes: int, side: int):
    made = models.builder(target)(channels=channels, classes=classes, image_size=side)
    if not isinstance(made, keras.Model):
        raise models.ModelNameError(f"--model-module {target} returned a {type(made).__name__}, not a Keras model: "
                                    "the PyTorch approaches train torch.nn.Modules")
    return made


def _resized(keras, task: TaskSpec, model):
    """`model` behind a bilinear resize to the task's size and grey repeated into 3 channels, where the input
    pipeline hands it other images."""
    side, channels = task.input_shape
    if (side, channels) == (task.model.image_size, task.model.channels):
        return model
    inputs = keras.Input((side, side, channels))
    x = inputs
    if channels != task.model.channels:
        x = keras.layers.Concatenate()([x] * task.model.channels)
    if side != task.model.image_size:
        x = keras.layers.Resizing(task.model.image_size, task.model.image_size, interpolation="bilinear")(x)
    return keras.Model(inputs, model(x), name=model.name)


def count_parameters(model) -> int:
    return int(sum(math.prod(w.shape) for w in model.trainable_weights))


if __name__ == "__main__":  # the request's check (bench.run.model_check)
    import sys

    sys.exit(models.check_build(lambda task: build_model(TaskSpec.from_dict(task)), count_parameters, sys.argv[1:]))
