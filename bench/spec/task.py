"""The task every implementation trains, as one tree of dataclasses: the model, the recipe, the timing, the data
and the run options (`TaskSpec`). spec.json holds the tree and a rank loads it back into these same classes
(bench.spec.rank_spec); the command line and a row's `task` name each setting flat (`FLAT`).

One `TaskSpec` is read by every framework, so nothing framework-specific lives here. Presets are plain code: easy
to read, diff and override.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

from bench import command
from bench.spec import models
from bench.spec.setting import Setting, declared, setting

PRECISIONS = ("fp32", "bf16", "fp16")


OPTIMIZERS = ("sgd", "adam", "adamw")
SCHEDULES = ("constant", "step", "cosine")
# Weak: the per-device batch stays, the global batch grows with the devices (tf_cnn_benchmarks, MLPerf);
# strong: the global batch stays and is split over them.
SCALINGS = ("weak", "strong")
LR_SCALINGS = ("linear", "none")
# Under weak scaling with the learning rate scaled, the warm-up a sweep gives it unless told (epochs).
WEAK_SCALING_WARMUP_EPOCHS = 0.5
DATASETS = ("fashion-mnist", "digits", "synthetic", "imagefolder")
# (side, channels, classes) of the bundled datasets, for --dataset on a preset made for another
DATASET_SHAPES = {"fashion-mnist": (28, 1, 10), "digits": (8, 1, 10)}
# Where a step's images come from: the cached dataset in memory; image files through the framework's own
# file pipeline (torchvision ImageFolder + DataLoader, tf.data); the same files from an S3-compatible
# object store (--data-url); or (the input pipeline's cost left out) one batch made on the device.
# A synthetic dataset is always read the last way.
INPUTS = ("memory", "files", "s3", "synthetic")
FILE_INPUTS = ("files", "s3")
# Refused here for one input, and by bench.request for a sweep's list of them.
WORKERS_WITHOUT_FILES = "--loader-workers goes with --input files or s3 (the in-memory input has no decoders)"
DATA_URL_WITHOUT_S3 = "--data-url goes with --input s3"


class SpecError(ValueError):
    """Bad user input: the message is one line that names the fix."""


def check_choice(name: str, value, choices) -> None:
    """One of the task's fixed choices (an input, a precision, a schedule ...), or the one-line error naming them."""
    if value not in choices:
        raise SpecError(f"unknown {name} {value!r}: choose one of {', '.join(choices)}")


@dataclass(frozen=True)
class ModelSpec:
    """What is trained: the model and the images it takes."""
    # a built-in model, a library's (timm:, torchvision:, keras:) or one named for both
    name: str = field(metadata=setting(
        "override the task's model: a built-in one or one both frameworks' libraries build, named once "
        "(efficientnet_b0, convnext_tiny ...: `bench list`), timm:NAME or torchvision:NAME (PyTorch's approaches), "
        "keras:NAME (a keras.applications model, TensorFlow's); random weights, nothing downloaded", option="--model"))
    image_size: int = field(metadata=setting(  # square images, pixels per side
        "train at this side: a bundled dataset is resized on the device, an image folder's files as they are decoded "
        "(default: the dataset's, or the folder's first image)"))
    channels: int = field(metadata=setting(
        "train on 1 or 3 channels: grey images repeated into 3 for a model that needs them (default: the dataset's)",
        choices=(1, 3)))
    classes: int
    head_dropout: float = field(default=0.0, metadata=setting(
        "a library model's dropout before its classifier (timm's drop_rate, a Keras Dropout)", metavar="P"))


@dataclass(frozen=True)
class Recipe:
    """How it is trained: batch, optimizer, learning-rate schedule, precision, seed."""
    global_batch: int = field(metadata=setting("override the task's global batch"))
    epochs: int = field(metadata=setting("override the task's epochs"))
    lr: float = field(metadata=setting("base learning rate (one device's)"))
    momentum: float = field(default=0.9, metadata=setting("SGD momentum"))
    weight_decay: float = field(default=0.0, metadata=setting("L2 in the gradient (sgd, adam); decoupled (adamw)"))
    optimizer: str = field(default="sgd", metadata=setting("the task's optimizer (default sgd, momentum 0.9)",
                                                        choices=OPTIMIZERS))
    # The learning rate over training, per step: a linear warm-up, then constant, step (x lr_gamma every
    # lr_step_epochs) or cosine (to 0 at the end) decay.
    schedule: str = field(default="constant", metadata=setting(
        "after the warm-up: constant (default), step (x --lr-gamma every --lr-step-epochs), cosine (to 0)",
        choices=SCHEDULES))
    # None: none, or WEAK_SCALING_WARMUP_EPOCHS when the rate is scaled (TaskSpec.effective_warmup_epochs)
    warmup_epochs: float | None = field(default=None, metadata=setting(
        "linear learning-rate warm-up, in epochs (default 0)"))
    lr_step_epochs: int = field(default=1, metadata=setting("--schedule step: epochs between decays (default 1)"))
    lr_gamma: float = field(default=0.1, metadata=setting("--schedule step: the factor of each decay (default 0.1)"))
    # How the batch follows the device count, and the learning rate the batch (Goyal et al., 2017).
    scaling: str = field(default="strong", metadata=setting(
        "weak: each device keeps --per-device-batch and the global batch grows with the devices (sweep default); "
        "strong: the global batch is split over them (run default)", choices=SCALINGS))
    per_device_batch: int | None = field(default=None, metadata=setting(
        "weak scaling: each device's batch (default: the task's batch at one device)"))
    lr_scaling: str = field(default="linear", metadata=setting(
        "weak scaling: linear (default) multiplies the learning rate by the devices, with a warm-up "
        f"({WEAK_SCALING_WARMUP_EPOCHS} epochs unless --warmup-epochs); none keeps it", choices=LR_SCALINGS))
    lr_scale: float = 1.0                 # set by TaskSpec.for_world: the factor the base lr is multiplied by
    seed: int = 0
    precision: str = field(default="fp32", metadata=setting(
        "fp32 | bf16 | fp16 (fp16 needs CUDA); default: the task's (fp32) on CPU, bf16 on CUDA", choices=PRECISIONS))
    # An epoch's steps at most (None: the whole training set). Sizes a sweep of a large model to its time.
    steps_per_epoch: int | None = field(default=None, metadata=setting(
        "train at most this many steps an epoch (each epoch's own order, cut short; the evaluation still reads the "
        "whole test set)"))


@dataclass(frozen=True)
class Timing:
    """How it is measured: steps never timed, the timed windows, how often the loss is kept, the target."""
    warmup_steps: int = field(default=10, metadata=setting(
        "steps trained before the first timed window, never timed (default: the task's)"))
    window_steps: int = field(default=20, metadata=setting("steps in each timed window (default: the task's)"))
    windows: int = field(default=10, metadata=setting("override the number of timing windows"))
    loss_every_steps: int = field(default=10, metadata=setting(  # the loss curve
        "rank 0 records the training loss every N steps (default 10)", option="--loss-every"))
    # The input's cost inside the run: each timed window followed by one on the same batches made resident first.
    input_phases: bool = field(default=False, metadata=setting(
        "time each window twice, fed by the input pipeline and then by its batches made resident on the device "
        "beforehand (the pipeline idle): the input's cost as the pairs' ratio, in the run itself"))
    target_accuracy: float | None = None  # for time-to-accuracy


@dataclass(frozen=True)
class DataSpec:
    """Where the images come from."""
    dataset: str = field(metadata=setting("override the task's dataset; imagefolder reads --data-dir", choices=DATASETS))
    # A sweep's --input and --loader-workers take several, comma-separated (bench.request.input_modes).
    input: str = field(default="memory", metadata=setting(
        "memory: the cached dataset (default); files: image files through the framework's file pipeline "
        "(ImageFolder + DataLoader, tf.data); s3: the same from --data-url; synthetic: one batch made on the device, "
        "the input pipeline left out (a sweep takes several, comma-separated)"))
    data_dir: str | None = field(default=None, metadata=setting(  # imagefolder root, or the dataset's files
        "dataset files (Fashion-MNIST idx files, or an image folder)"))
    val_split: float | None = field(default=None, metadata=setting(
        "imagefolder without test/ or val/: this fraction of each class, seeded, is the test set"))
    loader_workers: int = field(default=0, metadata=setting(
        "files | s3: parallel decoders (DataLoader worker processes, tf.data map threads), their cores taken from "
        "the slot's; 0 decodes in the training loop (default); a sweep takes several, e.g. 0,1,2",
        type=str, default="0"))
    data_url: str | None = field(default=None, metadata=setting(
        "--input s3: s3://BUCKET/PREFIX holding an image folder; the endpoint and credentials come from the AWS "
        "environment (AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, ...)"))


@dataclass(frozen=True)
class RunOptions:
    """How the approach runs it: compiled, checkpointed, its sharding (bench.spec.options: declared and checked in
    the approach's own package, kept here so that they are part of the run key), the device memory it is given."""
    compile: bool = field(default=False, metadata=setting(
        "torch.compile (Accelerate: its dynamo plugin) / TensorFlow XLA; a sweep runs every configuration eager and "
        "compiled; its compile time (the first step, never timed) is the report's compile s"))
    checkpoint_every_epoch: bool = field(default=False, metadata=setting(
        "save model + optimizer after each epoch the approach's own way; the row times the save (the training "
        "stall) and loading it back, and counts its bytes"))
    # DeepSpeed's (and Accelerate's DeepSpeed plugin's) ZeRO stage: 1 shards the optimizer state, 2 + gradients,
    # 3 + parameters.
    zero_stage: int | None = None
    accelerate_plugin: str | None = None  # accelerate's fsdp | deepspeed plugin instead of its DDP
    # --device-memory: every rank given the memory of a smaller device (GiB): on CUDA the framework's own cap, on
    # a CPU the rank process's RLIMIT_DATA (framework and data included). Part of the run key.
    device_memory_gib: float | None = field(default=None, metadata=setting(
        "give every rank the memory of a smaller device: on CUDA the framework's own cap, on a CPU the rank "
        "process's (RLIMIT_DATA); a run that does not fit is recorded as such", option="--device-memory",
        metavar="GIB"))
    # The approach's own knobs set for this run (`bench run --set`), in bench.spec.knobs' canonical text; "": every
    # knob at its framework's default. Part of the run key.
    knobs: str = ""


def knob_texts(knobs: str) -> dict[str, str]:
    """A run's knobs text ("batch_scale=2.0 compile=true", bench.spec.knobs' canonical form) by name."""
    return dict(pair.split("=", 1) for pair in knobs.split())


def batch_scale(knobs: str) -> float:
    """The batch_scale knob's value in a run's knobs text (bench.spec.knobs declares it), 1 where it is not set:
    the factor its batch is of the recipe's."""
    return float(knob_texts(knobs).get("batch_scale", 1.0))


# Every approach's knobs that set a task option (bench.spec.knobs declares them): set, the option takes the knob's
# value; the option as shipped is its default (a knob does not fit a task that sets the option itself).
KNOB_OPTIONS = {"compile": lambda text: text == "true", "loader_workers": int}


def knob_options(knobs: str) -> dict[str, object]:
    """The task options a run's knobs set, typed: {"compile": True}."""
    return {name: parse(text) for name, text in knob_texts(knobs).items() if (parse := KNOB_OPTIONS.get(name))}


GROUPS = {"model": ModelSpec, "recipe": Recipe, "timing": Timing, "data": DataSpec, "options": RunOptions}
# Every setting by its flat name (the command line's, a row's `task`): (its group, its name there). The model's
# name is `model` flat and `model.name` in the tree.
FLAT = {("model" if (g, f.name) == ("model", "name") else f.name): (g, f.name)
        for g, cls in GROUPS.items() for f in dataclasses.fields(cls)}


def settings() -> list[Setting]:
    """Every task setting the command line takes, in the tree's order, each under its flat name and None where not
    given (the preset keeps its value)."""
    return [s for group, cls in GROUPS.items()
            for s in declared(cls, given_only=True, names={"name": "model"} if group == "model" else None)]


def given(args: argparse.Namespace) -> dict:
    """The settings the command line gave, by flat name (a switch left off and a flag not given: left out)."""
    given_values = {s.dest: getattr(args, s.dest, None) for s in settings()}
    return {flat: value for flat, value in given_values.items() if value is not None and value is not False}


def _flat_defaults() -> dict:
    """Each flat setting's default (None where it has none), for a row written before the setting existed."""
    out = {"name": None}
    for flat, (group, name) in FLAT.items():
        [field] = [f for f in dataclasses.fields(GROUPS[group]) if f.name == name]
        out[flat] = None if field.default is dataclasses.MISSING else field.default
    return out


FLAT_DEFAULTS = _flat_defaults()


@dataclass(frozen=True)
class TaskSpec:
    """The task every approach trains, as one tree: its model, recipe, timing, data and run options."""
    name: str
    model: ModelSpec
    recipe: Recipe
    data: DataSpec
    timing: Timing = Timing()
    options: RunOptions = RunOptions()

    @property
    def synthetic(self) -> bool:
        """Batches made on the device: a synthetic dataset, or a real one's synthetic twin."""
        return self.data.dataset == "synthetic" or self.data.input == "synthetic"

    @property
    def input_shape(self) -> tuple[int, int]:
        """(side, channels) of the images as the input pipeline hands them to the model. A bundled dataset in
        memory keeps its own; the model resizes it on the device to (image_size, channels) where they differ
        (--image-size, --channels). Files are decoded, and synthetic batches made, at the task's size."""
        if self.data.input == "memory" and self.data.dataset in DATASET_SHAPES:
            side, channels, _ = DATASET_SHAPES[self.data.dataset]
            return side, channels
        return self.model.image_size, self.model.channels

    @property
    def reads_files(self) -> bool:
        """Images decoded from files (local or S3) by the framework's input pipeline, every epoch."""
        return self.data.input in FILE_INPUTS

    @property
    def peak_lr(self) -> float:
        return self.recipe.lr * self.recipe.lr_scale

    @property
    def warmup_start_factor(self) -> float:
        """Where the warm-up starts, as a fraction of the peak: at the unscaled rate when the rate was
        scaled (Goyal et al.'s gradual warm-up), else at a tenth of it."""
        return 1.0 / self.recipe.lr_scale if self.recipe.lr_scale > 1 else 0.1

    def for_world(self, world_size: int) -> "TaskSpec":
        """The task as `world_size` devices train it: under weak scaling the global batch is the per-device
        batch times the devices, and the learning rate follows it (linear rule, with a warm-up); a batch scaled
        by the batch_scale knob moves the learning rate by the same rule."""
        linear = self.recipe.lr_scaling == "linear"
        knob = batch_scale(self.options.knobs) if linear else 1.0
        if self.recipe.scaling == "strong":
            return self.replace(lr_scale=knob)
        per_device = self.recipe.per_device_batch or self.recipe.global_batch
        scale = float(world_size) if linear else 1.0
        return self.replace(global_batch=per_device * world_size, per_device_batch=per_device, lr_scale=scale * knob)

    def with_knobs(self, text: str) -> "TaskSpec":
        """The task with the approach's knobs set to `text` (bench.spec.knobs' canonical text). A batch_scale
        among them multiplies the recipe's batch (the global one, and the per-device one where given), and the
        learning rate by the task's rule; compile and loader_workers set their task options; setting other knobs,
        or none, brings the recipe's batch and the options as shipped back."""
        changes = {"knobs": text, **{name: FLAT_DEFAULTS[name] for name in knob_options(self.options.knobs)},
                   **knob_options(text)}
        factor = batch_scale(text) / batch_scale(self.options.knobs)
        if factor != 1:
            per_device = self.recipe.per_device_batch
            changes.update(global_batch=round(self.recipe.global_batch * factor),
                           per_device_batch=round(per_device * factor) if per_device is not None else None,
                           lr_scale=self.recipe.lr_scale * (factor if self.recipe.lr_scaling == "linear" else 1.0))
        return self.replace(**changes)

    def lr_warmup_steps(self, steps_per_epoch: int) -> int:
        """The learning-rate warm-up in optimizer steps, as both frameworks' schedules count it."""
        return round(self.effective_warmup_epochs * steps_per_epoch)

    @property
    def effective_warmup_epochs(self) -> float:
        """--warmup-epochs, else the warm-up a scaled rate gets by itself, else none."""
        if self.recipe.warmup_epochs is not None:
            return self.recipe.warmup_epochs
        return WEAK_SCALING_WARMUP_EPOCHS if self.recipe.lr_scale > 1 else 0.0

    def steps_per_epoch(self, train_count: int) -> int:
        """The optimizer steps of one epoch over `train_count` training samples: full global batches, at most
        the recipe's steps_per_epoch."""
        full = train_count // self.recipe.global_batch
        return min(full, self.recipe.steps_per_epoch) if self.recipe.steps_per_epoch else full

    def replace(self, **changes) -> "TaskSpec":
        """The task with settings changed by their flat names (`model`, `global_batch`, `zero_stage` ...)."""
        top = {k: changes.pop(k) for k in [k for k in changes if k == "name"]}
        grouped: dict[str, dict] = {}
        for flat, value in changes.items():
            if flat not in FLAT:
                raise TypeError(f"TaskSpec has no setting {flat!r}")
            group, field = FLAT[flat]
            grouped.setdefault(group, {})[field] = value
        return dataclasses.replace(self, **top, **{g: dataclasses.replace(getattr(self, g), **fields)
                                                   for g, fields in grouped.items()})

    def setting(self, flat: str):
        """One setting by its flat name."""
        group, field = FLAT[flat]
        return getattr(getattr(self, group), field)

    def to_dict(self) -> dict:
        """Every setting by its flat name: a row's `task`, what a run key and --resume compare."""
        return {"name": self.name, **{flat: self.setting(flat) for flat in FLAT}}

    @classmethod
    def from_dict(cls, doc: dict) -> "TaskSpec":
        """From its tree (spec.json) or its flat settings (a row's `task`, an older spec.json)."""
        if isinstance(doc.get("model"), dict):
            unknown = set(doc) - {"name", *GROUPS}
            if unknown:
                raise TypeError(f"TaskSpec has no group {', '.join(sorted(unknown))}")
            return cls(doc["name"], **{g: GROUPS[g](**doc[g]) for g in GROUPS if g in doc})
        grouped: dict[str, dict] = {g: {} for g in GROUPS}
        for flat, value in doc.items():
            if flat in FLAT:
                group, field = FLAT[flat]
                grouped[group][field] = value
        return cls(doc["name"], **{g: GROUPS[g](**fields) for g, fields in grouped.items() if fields})

    @classmethod
    def of(cls, name: str, **settings) -> "TaskSpec":
        return cls.from_dict({"name": name, **settings})

    def validate(self) -> None:
        check_choice("dataset", self.data.dataset, DATASETS)
        try:
            models.parse(self.model.name)
        except models.ModelNameError as exc:
            raise SpecError(str(exc)) from None
        if self.model.image_size < 1 or self.model.channels not in (1, 3):
            raise SpecError(f"images of {self.model.image_size} pixels and {self.model.channels} channels: give "
                            "--image-size 1 or more and --channels 1 or 3")
        recipe = self.recipe
        for name, value, choices in (("precision", recipe.precision, PRECISIONS), ("input", self.data.input, INPUTS),
                                     ("optimizer", recipe.optimizer, OPTIMIZERS), ("schedule", recipe.schedule, SCHEDULES),
                                     ("scaling", recipe.scaling, SCALINGS), ("lr scaling", recipe.lr_scaling, LR_SCALINGS)):
            check_choice(name, value, choices)
        if recipe.lr <= 0 or recipe.momentum < 0 or recipe.weight_decay < 0 or not 0 < recipe.lr_gamma <= 1:
            raise SpecError("--lr must be > 0, --momentum and --weight-decay >= 0, --lr-gamma in (0, 1]")
        if self.recipe.warmup_epochs is not None and not 0 <= self.recipe.warmup_epochs < self.recipe.epochs:
            raise SpecError(f"--warmup-epochs {self.recipe.warmup_epochs} must be at least 0 and fewer than the "
                            f"{self.recipe.epochs} epochs trained")
        if self.recipe.per_device_batch is not None and self.recipe.scaling != "weak":
            raise SpecError("--per-device-batch goes with --scaling weak (strong scaling splits --global-batch)")
        for field in ("global_batch", "epochs", "window_steps", "windows", "lr_step_epochs", "loss_every_steps"):
            if self.setting(field) < 1:
                raise SpecError(f"{field} must be at least 1 (got {self.setting(field)})")
        if self.timing.warmup_steps < 1:
            # The first step compiles kernels and grows allocators: never timed.
            raise SpecError(f"warmup_steps must be at least 1 (got {self.timing.warmup_steps})")
        if not 0 <= self.model.head_dropout < 1:
            raise SpecError(f"--head-dropout {self.model.head_dropout} must be at least 0 and below 1, e.g. 0.5")
        if self.model.head_dropout and not models.parse(self.model.name).library:
            raise SpecError(f"--head-dropout goes with a library's model (timm:, keras:, or one named for both); "
                            f"{self.model.name} has its own layers")
        if self.options.device_memory_gib is not None and not self.options.device_memory_gib > 0:
            raise SpecError(f"--device-memory {self.options.device_memory_gib}: give each device's memory in GiB, e.g. 4")
        if self.data.val_split is not None and not 0 < self.data.val_split < 1:
            raise SpecError(f"--val-split {self.data.val_split} must be between 0 and 1, e.g. 0.2")
        if self.recipe.steps_per_epoch is not None and self.recipe.steps_per_epoch < 1:
            raise SpecError(f"--steps-per-epoch must be at least 1 (got {self.recipe.steps_per_epoch})")
        if self.recipe.per_device_batch is not None and self.recipe.per_device_batch < 1:
            raise SpecError(f"--per-device-batch must be at least 1 (got {self.recipe.per_device_batch})")
        if self.data.dataset == "imagefolder" and not self.data.data_dir and self.data.input != "s3":
            raise SpecError("dataset imagefolder needs a directory: pass --data-dir DIR")
        self._validate_input()

    def _validate_input(self) -> None:
        if self.data.loader_workers < 0:
            raise SpecError(f"--loader-workers must be at least 0 (got {self.data.loader_workers})")
        if self.data.loader_workers and not self.reads_files:
            raise SpecError(WORKERS_WITHOUT_FILES)
        if self.reads_files and self.data.dataset == "synthetic":
            raise SpecError(f"task {self.name} is synthetic: it has no images for --input {self.data.input}; "
                            "pick a task with a dataset (e.g. --task default)")
        if self.data.input == "s3" and not (self.data.data_url or "").startswith("s3://"):
            raise SpecError("--input s3 reads an image folder from object storage: pass --data-url "
                            f"s3://BUCKET/PREFIX (fill it with `{command()} data export-images --task T s3://...`)")
        if self.data.data_url and self.data.input != "s3":
            raise SpecError(DATA_URL_WITHOUT_S3)


PRESETS: dict[str, TaskSpec] = {
    # Seconds: sklearn's bundled 8x8 digits. For tests and CI.
    "quick": TaskSpec.of(
        "quick", dataset="digits", model="small-cnn", image_size=8, channels=1, classes=10,
        global_batch=64, epochs=3, lr=0.05, warmup_steps=2, window_steps=4, windows=5,
        target_accuracy=0.5,
    ),
    # The main job: a small CNN in the style of the PyTorch MNIST examples on
    # Fashion-MNIST; two epochs reach >= 85 % test accuracy in every variant.
    "default": TaskSpec.of(
        "default", dataset="fashion-mnist", model="small-cnn", image_size=28, channels=1,
        # 20-step windows: under weak scaling 8 devices train 116 steps (batch 1024), still 4 windows.
        classes=10, global_batch=128, epochs=2, lr=0.05, warmup_steps=20, window_steps=20,
        windows=10, target_accuracy=0.85,
    ),
    # The classic pytorch/examples MNIST net (conv32, conv64, pool, dropout, fc128, fc10).
    "mnist-cnn": TaskSpec.of(
        "mnist-cnn", dataset="fashion-mnist", model="mnist-cnn", image_size=28, channels=1,
        classes=10, global_batch=128, epochs=2, lr=0.05, warmup_steps=10, window_steps=20,
        windows=10, target_accuracy=0.88,
    ),
    # The main job on GPUs (the default where the sweep runs on CUDA): ResNet-50 (timm's for PyTorch, Keras' for
    # TensorFlow) at 224 px in bf16, on Fashion-MNIST resized and repeated into 3 channels on the device, exact
    # test accuracy on the whole test set. The batch is per GPU (weak scaling in a sweep): 256 on an 80 GB card,
    # less on a smaller one (bench.request.gpu_batch). Two epochs of at most 20 steps (at 8 GPUs a whole
    # epoch is 29 steps of 2,048 images): 40 steps hold the warm-up (cuDNN's autotuning, the allocator) and 5
    # windows of 6, and keep an 80-run `make bench GPUS=8` to about 30 minutes on 8 H100s (its dry run projects it).
    "default-gpu": TaskSpec.of(
        "default-gpu", dataset="fashion-mnist", model="resnet50", image_size=224, channels=3, classes=10,
        global_batch=256, epochs=2, steps_per_epoch=20, lr=0.1, weight_decay=5e-5, warmup_steps=10,
        window_steps=6, windows=5, precision="bf16",
    ),
    # The standard GPU throughput benchmark: timm ResNet-50 on synthetic 224x224 images.
    "resnet50": TaskSpec.of(
        "resnet50", dataset="synthetic", model="resnet50", image_size=224, channels=3,
        classes=1000, global_batch=256, epochs=1, lr=0.1, weight_decay=1e-4, warmup_steps=10,
        window_steps=20, windows=10, precision="fp32",
    ),
    # The seeds' workloads, each with its own recipe, on Fashion-MNIST's real images resized on the device (exact
    # accuracy on a CPU, where they train at CPU_IMAGE_SIZE) or at 224 px on a GPU.
    # The TensorFlow seed: EfficientNet-B2 (timm's for PyTorch, keras.applications' for TensorFlow), a
    # dropout-0.5 head, Adam.
    "efficientnet-b2": TaskSpec.of(
        "efficientnet-b2", dataset="fashion-mnist", model="efficientnet_b2", image_size=224, channels=3,
        classes=10, global_batch=64, epochs=1, optimizer="adam", lr=0.001, head_dropout=0.5, warmup_steps=10,
        window_steps=20, windows=10,
    ),
    # The Dask seed: torchvision's ResNet-18, SGD with momentum 0.9 (PyTorch's approaches).
    "resnet18": TaskSpec.of(
        "resnet18", dataset="fashion-mnist", model="torchvision:resnet18", image_size=224, channels=3,
        classes=10, global_batch=64, epochs=1, lr=0.01, momentum=0.9, warmup_steps=10, window_steps=20, windows=10,
    ),
    # The Databricks seed: the PyTorch MNIST example of its day (two 5x5 convolutions, dropout), SGD momentum 0.5.
    "databricks-mnist": TaskSpec.of(
        "databricks-mnist", dataset="fashion-mnist", model="databricks-cnn", image_size=28, channels=1,
        classes=10, global_batch=64, epochs=2, lr=0.01, momentum=0.5, warmup_steps=10, window_steps=20,
        windows=10, target_accuracy=0.8,
    ),
}
# The side the seeds' large models train at on a CPU, where --image-size is not given (224 px on a GPU).
CPU_IMAGE_SIZE = {"efficientnet-b2": 32, "resnet18": 32}


# The task a command runs unless told (--task): the small CNN on a CPU, ResNet-50 on GPUs.
DEFAULT_TASK = {"cpu": "default", "cuda": "default-gpu"}


def preset_model(name: str) -> str:
    """The model a preset trains, as titles name it ("resnet50 at 224 px"); "" for a task of no preset."""
    preset = PRESETS.get(name)
    return f"{preset.model.name} at {preset.model.image_size} px" if preset else ""


def get_task(name: str, **overrides) -> TaskSpec:
    """A preset with command-line overrides (None means 'keep the preset's value')."""
    if name not in PRESETS:
        raise SpecError(f"unknown task {name!r}: choose one of {', '.join(PRESETS)} (see `{command()} list`)")
    task = PRESETS[name].replace(**{k: v for k, v in overrides.items() if v is not None})
    task.validate()
    return task
