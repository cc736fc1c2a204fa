"""The task every implementation trains: dataset, model and hyper-parameters.

One `TaskSpec` is read by every framework, so nothing framework-specific lives
here. Presets are plain code: easy to read, diff and override.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

PRECISIONS = ("fp32", "bf16", "fp16")
# The same precisions in Accelerate's words (its config file and ACCELERATE_MIXED_PRECISION).
ACCELERATE_MIXED_PRECISION = {"fp32": "no", "bf16": "bf16", "fp16": "fp16"}
OPTIMIZERS = ("sgd",)
DATASETS = ("fashion-mnist", "digits", "synthetic", "imagefolder")
MODELS = ("small-cnn", "mnist-cnn", "resnet50")
# Where a step's images come from: the cached dataset in memory, or (the input pipeline's cost left
# out) one batch made on the device. A synthetic dataset is always read the second way.
INPUTS = ("memory", "synthetic")


class SpecError(ValueError):
    """Bad user input: the message is one line that names the fix."""


@dataclass(frozen=True)
class TaskSpec:
    name: str
    dataset: str
    model: str
    image_size: int          # square images, pixels per side
    channels: int
    classes: int
    global_batch: int
    epochs: int
    lr: float
    momentum: float = 0.9
    weight_decay: float = 0.0
    optimizer: str = "sgd"
    seed: int = 0
    precision: str = "fp32"
    warmup_steps: int = 10
    window_steps: int = 20
    windows: int = 10
    target_accuracy: float | None = None  # for time-to-accuracy
    data_dir: str | None = None           # imagefolder root, or an override for the dataset's files
    input: str = "memory"
    compile: bool = False                 # torch.compile / tf.function(jit_compile=True)
    checkpoint_every_epoch: bool = False  # save model + optimizer state after each epoch, the approach's own way

    @property
    def synthetic(self) -> bool:
        """Batches made on the device: a synthetic dataset, or a real one's synthetic twin."""
        return self.dataset == "synthetic" or self.input == "synthetic"

    def replace(self, **changes) -> "TaskSpec":
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        if self.dataset not in DATASETS:
            raise SpecError(f"unknown dataset {self.dataset!r}: choose one of {', '.join(DATASETS)}")
        if self.model not in MODELS:
            raise SpecError(f"unknown model {self.model!r}: choose one of {', '.join(MODELS)}")
        if self.precision not in PRECISIONS:
            raise SpecError(f"unknown precision {self.precision!r}: choose one of {', '.join(PRECISIONS)}")
        if self.input not in INPUTS:
            raise SpecError(f"unknown input {self.input!r}: choose one of {', '.join(INPUTS)}")
        if self.optimizer not in OPTIMIZERS:
            raise SpecError(f"unknown optimizer {self.optimizer!r}: choose one of {', '.join(OPTIMIZERS)}")
        for field in ("global_batch", "epochs", "window_steps", "windows"):
            if getattr(self, field) < 1:
                raise SpecError(f"{field} must be at least 1 (got {getattr(self, field)})")
        if self.warmup_steps < 1:
            # The first step compiles kernels and grows allocators: never timed.
            raise SpecError(f"warmup_steps must be at least 1 (got {self.warmup_steps})")
        if self.dataset == "imagefolder" and not self.data_dir:
            raise SpecError("dataset imagefolder needs a directory: pass --data-dir DIR")


PRESETS: dict[str, TaskSpec] = {
    # Seconds: sklearn's bundled 8x8 digits. For tests and CI.
    "quick": TaskSpec(
        name="quick", dataset="digits", model="small-cnn", image_size=8, channels=1, classes=10,
        global_batch=64, epochs=3, lr=0.05, warmup_steps=2, window_steps=4, windows=5,
        target_accuracy=0.5,
    ),
    # The main job: a small CNN in the style of the PyTorch MNIST examples on
    # Fashion-MNIST; two epochs reach >= 85 % test accuracy in every variant.
    "default": TaskSpec(
        name="default", dataset="fashion-mnist", model="small-cnn", image_size=28, channels=1,
        classes=10, global_batch=128, epochs=2, lr=0.05, warmup_steps=20, window_steps=40,
        windows=10, target_accuracy=0.85,
    ),
    # The classic pytorch/examples MNIST net (conv32, conv64, pool, dropout, fc128, fc10).
    "mnist-cnn": TaskSpec(
        name="mnist-cnn", dataset="fashion-mnist", model="mnist-cnn", image_size=28, channels=1,
        classes=10, global_batch=128, epochs=2, lr=0.05, warmup_steps=10, window_steps=20,
        windows=10, target_accuracy=0.88,
    ),
    # The standard GPU throughput benchmark: timm ResNet-50 on synthetic 224x224 images.
    "resnet50": TaskSpec(
        name="resnet50", dataset="synthetic", model="resnet50", image_size=224, channels=3,
        classes=1000, global_batch=256, epochs=1, lr=0.1, weight_decay=1e-4, warmup_steps=10,
        window_steps=20, windows=10, precision="fp32",
    ),
}


def get_task(name: str, **overrides) -> TaskSpec:
    """A preset with command-line overrides (None means 'keep the preset's value')."""
    if name not in PRESETS:
        raise SpecError(f"unknown task {name!r}: choose one of {', '.join(PRESETS)} (see `python -m bench list`)")
    task = PRESETS[name].replace(**{k: v for k, v in overrides.items() if v is not None})
    task.validate()
    return task
