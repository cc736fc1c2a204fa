"""The task's models in PyTorch. tf_impl mirrors these layer for layer."""
from __future__ import annotations

import torch
from torch import nn

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


def build_model(task: TaskSpec) -> nn.Module:
    """The task's model, initialised from the task's seed (identical on every rank)."""
    torch.manual_seed(task.seed)
    args = (task.channels, task.classes, task.image_size)
    if task.model == "small-cnn":
        return SmallCNN(*args)
    if task.model == "mnist-cnn":
        return MnistCNN(*args)
    if task.model == "resnet50":
        import timm  # only here: timm pulls in torchvision

        return timm.create_model("resnet50", pretrained=False, num_classes=task.classes,
                                 in_chans=task.channels)
    raise ValueError(f"unknown model {task.model!r}")


def count_parameters(model: nn.Module) -> int:
    # ds_numel: a ZeRO-3 parameter's full size (its tensor is empty between the gathers)
    return sum(getattr(p, "ds_numel", p.numel()) for p in model.parameters() if p.requires_grad)
