"""--mlflow: the trained model as an MLflow model (`mlflow.keras`, MLflow's flavour for Keras 3), saved by the chief
into the run folder. A model Keras 2 trained (tf-multiworker-fit) is saved as a Keras 3 copy, which loads anywhere.

The weights are read from the strategy's variables (mirrored, or on the parameter servers) into a fresh copy of
the task's Keras model built outside any strategy scope, in float32: the saved model is the plain functional
model anyone can load, with no strategy and no mixed-precision policy of the run's. Its input is what the loop
feeds the network: normalised float images, NHWC (`tf_impl.train.normalise`).
"""
from __future__ import annotations

from importlib import metadata
from pathlib import Path

from bench.spec.task import TaskSpec
from bench.worker import Worker


def save(worker: Worker, network, chief: bool) -> None:
    """The chief: save the trained `network` with `mlflow.keras.save_model` (the others do nothing)."""
    if worker.logs_model and chief:
        worker.save_model(lambda directory: save_model(worker.task, network, directory))


def save_model(task: TaskSpec, network, directory: Path) -> str:
    import keras
    import mlflow.keras
    import numpy as np
    from mlflow.models import infer_signature

    from tf_impl.model import build_model

    keras.mixed_precision.set_global_policy("float32")  # training is over: the copy holds plain float32 layers
    fresh = build_model(task, keras)  # Keras 3 whichever Keras trained it (tf-multiworker-fit: Keras 2)
    fresh.set_weights(network.get_weights())
    # The signature from two images; no example kept (MLflow would store it as JSON beside the model).
    side, channels = task.input_shape
    example = np.zeros((2, side, side, channels), dtype=np.float32)
    signature = infer_signature(example, keras.ops.convert_to_numpy(fresh(example)))
    directory.mkdir(parents=True)  # mlflow.keras expects the folder (it writes an input example there first)
    # Requirements named: MLflow would otherwise load the model in a subprocess to infer them (seconds).
    mlflow.keras.save_model(fresh, str(directory), signature=signature,
                            pip_requirements=[f"keras=={keras.__version__}", tensorflow()])
    return "keras"


def tensorflow() -> str:
    """The TensorFlow distribution this process runs (`tensorflow`; `tensorflow-cpu` where a user installed that)."""
    for name in ("tensorflow", "tensorflow-cpu"):
        try:
            return f"{name}=={metadata.version(name)}"
        except metadata.PackageNotFoundError:
            continue
    return "tensorflow"
