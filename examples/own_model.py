"""Your own model, trained by every approach of its framework: `--model-module examples.own_model:torch_mlp`
(PyTorch's approaches) or `--model-module examples.own_model:keras_mlp` (TensorFlow's).

dtbench calls the function with the task's shape and trains what it returns, initialised from the task's seed.
Import your framework inside the function: the harness imports the module in a process of no framework first,
to learn which one the model is.
"""


def torch_mlp(channels: int, classes: int, image_size: int):
    from torch import nn

    return nn.Sequential(nn.Flatten(), nn.Linear(channels * image_size * image_size, 128), nn.ReLU(),
                         nn.Linear(128, classes))


def keras_mlp(channels: int, classes: int, image_size: int):
    import keras

    inputs = keras.Input((image_size, image_size, channels))
    x = keras.layers.Dense(128, activation="relu")(keras.layers.Flatten()(inputs))
    return keras.Model(inputs, keras.layers.Dense(classes, dtype="float32")(x))
