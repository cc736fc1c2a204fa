"""The task's models in PyTorch. tf_impl mirrors these layer for layer."""
from __future__ import annotations

import torch
from torch import nn

from bench.spec import models
from bench.spec.task import TaskSpec


class SmallCNN(nn.Module):
    """Two 3x3 conv blocks and two dense layers, in the style of the PyTorch MNIST examples."""

    def __init__(self, channels: int, classes: int, image_size: int):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(channels, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        side = image_size // 4
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(32 * side * side, 64), nn.ReLU(), nn.Linear(64, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


class MnistCNN(nn.Module):
    """pytorch/examples mnist/main.py: conv32, conv64, max-pool, dropout, fc128, dropout, fc10."""

    def __init__(self, channels: int, classes: int, image_size: int):
        super().__init__()
        side = (image_size - 4) // 2
        self.net = nn.Sequential(
            nn.Conv2d(channels, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
            nn.MaxPool2d(2), nn.Dropout(0.25), nn.Flatten(),
            nn.Linear(64 * side * side, 128), nn.ReLU(), nn.Dropout(0.5), nn.Linear(128, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class DatabricksCNN(nn.Module):
    """The PyTorch MNIST example Databricks' HorovodRunner guide trains: conv10 5x5, max-pool, conv20 5x5 with
    channel dropout, max-pool, fc50, dropout, fc10."""

    def __init__(self, channels: int, classes: int, image_size: int):
        super().__init__()
        side = ((image_size - 4) // 2 - 4) // 2
        self.net = nn.Sequential(
            nn.Conv2d(channels, 10, 5), nn.MaxPool2d(2), nn.ReLU(),
            nn.Conv2d(10, 20, 5), nn.Dropout2d(0.5), nn.MaxPool2d(2), nn.ReLU(), nn.Flatten(),
            nn.Linear(20 * side * side, 50), nn.ReLU(), nn.Dropout(0.5), nn.Linear(50, classes))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


def build_model(task: TaskSpec) -> nn.Module:
    """The task's model, initialised from the task's seed (identical on every rank): a built-in one, a timm or
    torchvision model, or the user's own (bench.spec.models), with random weights. Where the input pipeline
    hands it images of another size or channel count (a bundled dataset at --image-size / --channels), the
    first layer resizes them on the device."""
    torch.manual_seed(task.recipe.seed)
    name = models.parse(task.model.name)
    args = (task.model.channels, task.model.classes, task.model.image_size)
    if name.builtin:
        model = BUILT_IN[task.model.name](*args)
    elif name.source in ("timm", "paired"):
        model = _timm(name.library_name("torch"), *args, drop_rate=task.model.head_dropout)
    elif name.source == "torchvision":
        model = _torchvision(name.name, *args)
    elif name.source == models.OWN:
        shape = task.model
        model = models.builder(name.name)(channels=shape.channels, classes=shape.classes, image_size=shape.image_size)
        if not isinstance(model, nn.Module):
            raise models.ModelNameError(f"--model-module {name.name} returned a {type(model).__name__}, not a "
                                        "torch.nn.Module: the TensorFlow approaches train Keras models")
    else:
        raise models.ModelNameError(f"{task.model.name} is a {name.source} model: PyTorch's approaches train timm:, "
                                    "torchvision: and built-in models")
    if task.input_shape != (task.model.image_size, task.model.channels):
        return Resized(model, task.model.image_size, task.model.channels)
    return model


class Resized(nn.Module):
    """The model behind a resize to its input size (bilinear) and grey repeated into 3 channels, on the device."""

    def __init__(self, model: nn.Module, image_size: int, channels: int):
        super().__init__()
        self.model, self.size, self.channels = model, image_size, channels

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[1] != self.channels:
            x = x.expand(-1, self.channels, -1, -1)
        if x.shape[-1] != self.size:
            x = nn.functional.interpolate(x, size=(self.size, self.size), mode="bilinear", align_corners=False)
        return self.model(x)


def _timm(name: str, channels: int, classes: int, image_size: int, drop_rate: float = 0.0) -> nn.Module:
    import timm  # only here: timm pulls in torchvision

    if not timm.is_model(name):
        raise models.ModelNameError(f"timm:{name}: timm {timm.__version__} has no such model (timm.list_models("
                                    f"'*{name.split('_')[0]}*') lists the near ones)")
    build = dict(pretrained=False, num_classes=classes, in_chans=channels, drop_rate=drop_rate)
    try:  # a transformer's patch grid follows the image size; a CNN takes any size and no such argument
        return timm.create_model(name, img_size=image_size, **build)
    except TypeError:
        return timm.create_model(name, **build)


def _torchvision(name: str, channels: int, classes: int, image_size: int) -> nn.Module:
    import torchvision

    if name not in torchvision.models.list_models():
        raise models.ModelNameError(f"torchvision:{name}: torchvision {torchvision.__version__} has no such model "
                                    "(torchvision.models.list_models() lists them)")
    if channels != 3:
        raise models.ModelNameError(f"torchvision:{name} takes 3-channel images: add --channels 3")
    return torchvision.models.get_model(name, weights=None, num_classes=classes)


def _timm_resnet50(channels: int, classes: int, image_size: int) -> nn.Module:
    import timm

    return timm.create_model("resnet50", pretrained=False, num_classes=classes, in_chans=channels)


BUILT_IN = {"small-cnn": SmallCNN, "mnist-cnn": MnistCNN, "databricks-cnn": DatabricksCNN, "resnet50": _timm_resnet50}


def count_parameters(model: nn.Module) -> int:
    # ds_numel: a ZeRO-3 parameter's full size (its tensor is empty between the gathers)
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)


if __name__ == "__main__":  # the request's check (bench.run.model_check)
    import sys

    sys.exit(models.check_build(lambda task: build_model(TaskSpec.from_dict(task)), count_parameters, sys.argv[1:]))
