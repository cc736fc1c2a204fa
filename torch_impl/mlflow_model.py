"""--mlflow: the trained model as an MLflow model (`mlflow.pytorch`), saved by rank 0 into the run folder.

Whatever wrapped the model for training (DDP, FSDP, DeepSpeed's engine, Fabric, Accelerate), its full state is
gathered the wrapper's own way and loaded into a fresh, unwrapped copy of the task's model on the CPU in fp32,
which MLflow saves in its default format, "pt2" (`torch.export`: a traced graph and its weights, no pickle, so it
loads without this repository and without MLflow's pickle opt-in), traced on an example batch of two images. Its
input is what the loop feeds the model: normalised float images, NCHW (`torch_impl.data.to_model_input`).
"""
from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from bench.spec.task import TaskSpec
from bench.worker import Worker


def full_state(module: nn.Module) -> dict[str, torch.Tensor]:
    """The state of a module whose parameters may be DeepSpeed ZeRO-3 partitions: gathered for the read (every
    rank calls it; a no-op for whole parameters), copied to the CPU."""
    parameters = [p for p in module.parameters() if hasattr(p, "ds_id")]
    if not parameters:
        return {name: tensor.detach().cpu() for name, tensor in module.state_dict().items()}
    import deepspeed

    with deepspeed.zero.GatheredParameters(parameters, modifier_rank=None):
        return {name: tensor.detach().cpu().clone() for name, tensor in module.state_dict().items()}


def save(worker: Worker, state: dict[str, torch.Tensor] | None) -> None:
    """Rank 0 (the one passing `state`): save the trained model with `mlflow.pytorch.save_model`."""
    if state is not None:
        worker.save_model(lambda directory: save_model(worker.task, state, directory))


def save_model(task: TaskSpec, state: dict[str, torch.Tensor], directory: Path) -> str:
    import mlflow.pytorch
    import numpy as np

    from torch_impl import model as models

    fresh = models.build_model(task)
    fresh.load_state_dict({name: tensor.float() if tensor.is_floating_point() else tensor
                           for name, tensor in state.items()})
    fresh.eval()
    # Two images (a batch of one would fix the batch dimension in the traced graph): its signature, its trace.
    # Zeros: MLflow keeps the example as JSON beside the model (random 224px images made 15 MB of ResNet-50's 120).
    side, channels = task.input_shape
    example = np.zeros((2, channels, side, side), dtype=np.float32)
    requirements = [f"torch=={torch.__version__.split('+')[0]}"]
    if task.model.name == "resnet50" or task.model.name.startswith("timm:"):
        import timm

        requirements.append(f"timm=={timm.__version__}")
    if task.model.name.startswith("torchvision:"):
        import torchvision

        requirements.append(f"torchvision=={torchvision.__version__.split('+')[0]}")
    # Requirements named: MLflow would otherwise load the model in a subprocess to infer them (seconds).
    mlflow.pytorch.save_model(fresh, str(directory), serialization_format="pt2", input_example=example,
                              pip_requirements=requirements)
    return "pytorch"
