"""What "the same configuration" means everywhere: the run key (folding repeats, scaling baselines, regression
groups, report labels), built here and nowhere else, and the task settings the key leaves out, compared by
one rule (`same_settings`: resume, regress, --resume-from). Standard library only."""
from __future__ import annotations

from typing import NamedTuple

from bench.spec import options
from bench.spec.task import FLAT_DEFAULTS, batch_scale, knob_options
from bench.spec.variants import VARIANTS

OWN_LAUNCHERS = ("local", "torchrun")  # engines that are the variant's own launcher: not named in labels


class RunKey(NamedTuple):
    variant: str
    engine: str            # local (the variant's own launcher only) | torchrun | ray | spark | dask
    device_type: str
    nodes: int
    devices_per_node: int
    task: str
    precision: str
    global_batch: int
    independent: bool      # gradient synchronisation off: the no-communication bound
    input: str = "memory"  # memory | files | s3 | synthetic (a real dataset's twin with the input pipeline left out)
    compile: bool = False  # torch.compile / XLA
    scaling: str = "strong"      # weak: the per-device batch stays as devices are added; strong: the global batch
    per_device_batch: int = 0    # global_batch / world size
    dataset: str = ""            # the task's dataset, when a run overrides it (--dataset imagefolder:NAME:SIZEpx)
    recipe: str = ""             # the training recipe, where it is not the preset's (optimizer=adamw lr=0.001 ...)
    loader_workers: int = 0      # files | s3: the input pipeline's parallel decoders
    sharding: str = ""           # the ZeRO stage / Accelerate plugin the run chose: "ZeRO-2", "fsdp plugin"
    as_shipped: bool = False     # --as-shipped: the framework on its own defaults, not dtbench's fast path
    model: str = ""              # the model and its input, where not the preset's: "timm:resnet18 at 32px 3ch"
    device_memory: float = 0.0   # --device-memory: each device's memory budget in GiB (0: the device's own)
    knobs: str = ""              # the approach's own knobs set (bench run --set): "bucket_cap_mb=100"

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def asynchronous(self) -> bool:
        """Its workers update the weights without waiting for each other (Variant.asynchronous): every label says so."""
        known = VARIANTS.get(self.variant)
        return bool(known and known.asynchronous)

    @property
    def series(self) -> str:
        """How tables and plots name the series: variant, (no sync), [engine] when not its own launcher."""
        engine = f" [{self.engine}]" if self.engine not in OWN_LAUNCHERS else ""
        modes = [m for m, on in (("asynchronous", self.asynchronous), (self.sharding, bool(self.sharding)),
                                 ("compiled", self.compile), ("no sync", self.independent),
                                 (self.input_mode, self.input != "memory"), (self.dataset, bool(self.dataset)),
                                 (self.model, bool(self.model)), (self.recipe, bool(self.recipe)),
                                 ("as shipped", self.as_shipped), (self.budget, bool(self.device_memory)),
                                 (self.knobs, bool(self.knobs))) if on]
        return self.variant + "".join(f" ({m})" for m in modes) + engine

    @property
    def shipped(self) -> "RunKey":
        """The same configuration as shipped: the same approach, engine, stage ... with none of its own knobs set,
        at the recipe's batch where the batch_scale knob scaled it, eager where the compile knob compiled it."""
        factor = batch_scale(self.knobs)
        return self._replace(knobs="", global_batch=round(self.global_batch / factor),
                             per_device_batch=round(self.per_device_batch / factor),
                             **{name: FLAT_DEFAULTS[name] for name in knob_options(self.knobs)})

    @property
    def budget(self) -> str:
        """--device-memory as labels name it: "2 GiB a device"."""
        return f"{self.device_memory:g} GiB a device" if self.device_memory else ""

    @property
    def input_mode(self) -> str:
        """memory, synthetic, or a file pipeline with its decoders: "files", "s3, 2 workers"."""
        workers = f", {self.loader_workers} worker{'s' if self.loader_workers > 1 else ''}" if self.loader_workers else ""
        return self.input + workers

    @property
    def label(self) -> str:
        return (f"{self.series} {self.nodes}x{self.devices_per_node} {self.device_type} "
                f"{self.task}/{self.precision} batch {self.global_batch} ({self.scaling})")

    def one_device(self, variant: str | None = None) -> "RunKey":
        """The scaling baseline: this configuration on one device with gradients synchronised — under weak
        scaling at the same per-device batch, under strong at the same global batch; with `variant`, that
        variant's run instead (a plain single-device loop, which no engine runs)."""
        batch = self.per_device_batch if self.scaling == "weak" else self.global_batch
        one = self._replace(nodes=1, devices_per_node=1, independent=False, global_batch=batch, per_device_batch=batch)
        return one if variant is None else one._replace(variant=variant, engine="local", sharding="")


def config_key(row: dict) -> RunKey:
    """The key of a result row (as a dict: a stored line, or `ResultRow.to_dict()`)."""
    task = row["task"]
    world = int(row["nodes"]) * int(row["devices_per_node"])
    global_batch = int(task.get("global_batch") or 0)
    return RunKey(row["variant"], row.get("engine") or "local", row["device_type"], int(row["nodes"]),
                  int(row["devices_per_node"]), task["name"], task.get("precision", "fp32"), global_batch,
                  bool(row.get("independent")), task.get("input", "memory"), bool(task.get("compile")),
                  task.get("scaling") or "strong", global_batch // world, dataset_override(task), recipe_override(task),
                  int(task.get("loader_workers") or 0), options.label(row["variant"], task),
                  bool(row.get("as_shipped")), model_override(task), float(task.get("device_memory_gib") or 0),
                  task.get("knobs") or "")


def settings(task: dict) -> dict:
    """The task's settings as a spec writes them (what a row adds, such as params, is no TaskSpec field); a field
    an older row or spec predates at its default. per_device_batch is derived from the global batch and the world
    size, which the key holds."""
    from bench.spec.task import FLAT_DEFAULTS

    return {name: task.get(name, default) for name, default in FLAT_DEFAULTS.items() if name != "per_device_batch"}


def settings_differ(a: dict, b: dict) -> list[str]:
    """The task settings (those the key leaves out too: epochs, windows, learning rate ...) that differ."""
    mine, theirs = settings(a), settings(b)
    return [name for name in mine if mine[name] != theirs[name]]


def same_settings(a: dict, b: dict) -> bool:
    return not settings_differ(a, b)


def settings_token(task: dict) -> str:
    """The settings as one comparable string (lists are not hashable)."""
    return repr(sorted((name, repr(value)) for name, value in settings(task).items()))


RECIPE_FIELDS = ("optimizer", "lr", "momentum", "weight_decay", "schedule", "warmup_epochs", "lr_step_epochs",
                 "lr_gamma", "lr_scaling")


def dataset_override(task: dict) -> str:
    """The dataset when it is not the task preset's own ("" otherwise), so such runs never fold together;
    an image folder by its folder name and size."""
    from bench.spec.task import PRESETS

    preset = PRESETS.get(task.get("name"))
    dataset = task.get("dataset") or ""
    if preset is None or dataset == preset.data.dataset:
        return ""
    if dataset == "imagefolder":
        source = task.get("data_url") if task.get("input") == "s3" else task.get("data_dir")
        folder = (source or "").rstrip("/").rsplit("/", 1)[-1]
        return f"imagefolder:{folder}:{task.get('image_size')}px"
    return dataset


def model_override(task: dict) -> str:
    """The model, and the size and channels it is fed, where they are not the task preset's ("" otherwise): runs of
    two models (or sizes) never fold together. A dataset override's own shape is the dataset's, not named here."""
    from bench.spec.task import PRESETS

    preset = PRESETS.get(task.get("name"))
    if preset is None:
        return ""
    model = task.get("model", preset.model.name)
    parts = [model] if model != preset.model.name else []
    dropout = task.get("head_dropout", preset.model.head_dropout)
    parts += [f"dropout {dropout:g}"] if dropout != preset.model.head_dropout else []
    if not dataset_override(task) or task.get("dataset") == "synthetic":
        side, channels = task.get("image_size", preset.model.image_size), task.get("channels", preset.model.channels)
        parts += [f"at {side}px"] if side != preset.model.image_size else []
        parts += [f"{channels}ch"] if channels != preset.model.channels else []
    return " ".join(parts)


def recipe_override(task: dict) -> str:
    """The recipe settings that differ from the task preset's ("" when none do). The warm-up weak scaling
    adds by itself (no --warmup-epochs) is part of the scaling mode, not of the recipe."""
    from bench.spec.task import PRESETS

    preset = PRESETS.get(task.get("name"))
    if preset is None:
        return ""
    return " ".join(f"{name}={task[name]}" for name in RECIPE_FIELDS
                    if name in task and task[name] != preset.setting(name))


def scaling_efficiency(throughput_n: float, devices: int, throughput_1: float | None) -> float | None:
    """throughput(N) / (N x throughput(1))."""
    if not throughput_1 or devices < 1:
        return None
    return throughput_n / (devices * throughput_1)


def efficiencies(key: RunKey, throughput: float, one_device: dict[RunKey, float],
                 single_variant: str | None) -> tuple[float | None, float | None]:
    """The one rule for scaling efficiency: (vs the same configuration on one device, vs the
    framework's plain single-device loop), from the one-device throughputs by key. A no-sync run
    has none (it is the bound, not a result); a one-device run is not compared with itself."""
    if key.independent:
        return None, None
    own = None if key.world_size == 1 else scaling_efficiency(throughput, key.world_size,
                                                             one_device.get(key.one_device()))
    single = (scaling_efficiency(throughput, key.world_size, one_device.get(key.one_device(single_variant)))
              if single_variant else None)
    return own, single
