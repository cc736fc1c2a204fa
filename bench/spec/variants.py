"""The registry of variants: one approach each, its framework, launcher and reach."""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass

from bench import command
from bench.spec import frameworks
from bench.spec.frameworks import Framework, install_hint, load  # noqa: F401  (load: the harness imports it here)
from bench.spec.task import SpecError

# What starts the ranks of the variants that have an engine entry: torchrun (their own launcher), or an engine.
ENGINES = ("torchrun", "ray", "spark", "dask")


@dataclass(frozen=True)
class Variant:
    name: str
    family: str                # its framework's record (bench.spec.frameworks): models, fast path, interpreter
    framework: str             # distribution name, for version capture; what its rows record as "framework"
    launch: str                # "module:NAME" of its Launcher (bench.run.launch): its own package's launch.py
    module: str                # python module run inside each worker process
    single_process: bool       # one process drives all of a node's devices
    spans_nodes: bool          # can run on more than one (fake) node
    summary: str
    cpu_max_per_node: int | None = None  # device slots one node can use on CPU (None: any)
    cpu_limit_reason: str = ""
    processes_per_node_fixed: int | None = None  # e.g. one MWMS worker per node
    in_default_sweep: bool = True
    max_devices: int | None = None  # on any device type (the single-device baselines)
    baseline: str | None = None     # the framework's plain single-device loop, for efficiency vs no wrapper
    independent: bool = False       # can run with gradient synchronisation off (the no-communication bound)
    engine_entry: str | None = None  # "module:function" an engine (Ray, Spark, Dask) runs on every rank
    options: str | None = None       # the module of its own options (bench.spec.options): --zero-stage, ...
    knobs: str | None = None         # "module:NAME" of its own knobs (bench.spec.knobs): what tuning sets
    checkpoints: bool = True         # --checkpoint-every-epoch is written for it
    checkpoint_hint: str = ""        # why not, and what to use
    compiles: bool = True            # --compile is wired (torch.compile / XLA)
    reads_files: bool = True         # --input files | s3 is wired
    profiles: bool = True            # --profile is wired (the framework's profiler over the profiled windows)
    # Each worker updates the shared weights without waiting for the others: not synchronous data parallelism,
    # its accuracy and speed not comparable as such (the row and the report say so); the chief alone reports.
    asynchronous: bool = False
    custom_loop: str | None = None  # a Keras fit variant: the custom-loop variant its cost is read against
    # Set in every process it starts, before the framework is imported (tf-multiworker-fit: Keras 2).
    env: tuple[tuple[str, str], ...] = ()
    # What its module's ranks are told, in the spec they read ("approach"): an approach that is another's with
    # one setting changed is that module with the setting (torch-ddp-static: torch_impl.ddp, static_graph).
    approach: tuple[tuple[str, object], ...] = ()
    # The collectives of one step, as a projection counts them (bench.projection.projection.TRAFFIC): "ddp" (one
    # all-reduce), "fsdp", or "zero" (by --zero-stage).
    traffic: str = "ddp"
    # What it imports beyond its framework, as (module, the extra that installs it): deepspeed, lightning_fabric.
    requires: tuple[tuple[str, str], ...] = ()
    # Its loop feeds the clock's resident windows (--input-phases; None: as its framework's loops do).
    input_phases: bool | None = None
    # With them on several ranks it also trains each resident window's batches with its sync off and undoes them:
    # the exposed communication in the run (bench.worker.clock), where `independent` needs a no-sync run.
    sync_phases: bool = False

    @property
    def times_input_in_phases(self) -> bool:
        return self.plugin.input_phases if self.input_phases is None else self.input_phases

    @property
    def plugin(self) -> Framework:
        """Its framework's record: what the harness asks instead of branching on the framework's name."""
        return frameworks.get(self.family)

    def not_installed(self) -> str | None:
        """Why it cannot start here (its framework, or a library it wraps, is not importable), or None."""
        if not self.plugin.installed():
            return (f"{self.name} trains with {self.plugin.title}, which is not installed here: "
                    f"{install_hint(self.plugin.extra)}")
        missing = [extra for module, extra in self.requires if not frameworks.importable(sys.executable, module)]
        if missing:
            return f"{self.name} needs {self.framework}, which is not installed here: {install_hint(missing[0])}"
        return None

    @property
    def launcher_spec(self):
        """Its Launcher, imported by name: the harness imports no approach."""
        return load(self.launch)

    @property
    def launcher(self) -> str:
        """What starts its processes, as rows record it: torchrun, accelerate, python, tf-config, ..."""
        return self.launcher_spec.name

    @property
    def options_module(self):
        """The module of its own options, imported by name (None: it takes none)."""
        return importlib.import_module(self.options) if self.options else None

    def processes_per_node(self, devices_per_node: int) -> int:
        if self.single_process:
            return 1
        return self.processes_per_node_fixed or devices_per_node


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("torch-ddp", "torch", "torch", "torch_impl.launch:TORCHRUN", "torch_impl.ddp", single_process=False,
            spans_nodes=True, summary="PyTorch DistributedDataParallel under torchrun (gloo on CPU, nccl on CUDA)",
            baseline="torch-single", independent=True, engine_entry="torch_impl.ddp:train", knobs="torch_impl.knobs:DDP",
            sync_phases=True),
    Variant("torch-ddp-static", "torch", "torch", "torch_impl.launch:TORCHRUN", "torch_impl.ddp",
            single_process=False, spans_nodes=True,
            summary="PyTorch DistributedDataParallel with static_graph=True (buckets fixed to the gradients' order "
                    "after the first step) under torchrun", baseline="torch-single",
            approach=(("static_graph", True),), knobs="torch_impl.knobs:DDP_STATIC"),
    Variant("torch-fsdp", "torch", "torch", "torch_impl.launch:TORCHRUN", "torch_impl.fsdp", single_process=False,
            spans_nodes=True, traffic="fsdp",
            summary="PyTorch FSDP2 (fully_shard per block + root) under torchrun: parameters, gradients and "
                    "optimizer state sharded over the ranks", baseline="torch-single", checkpoints=False,
            checkpoint_hint="its state is sharded: torch.distributed.checkpoint is the way, not written here",
            knobs="torch_impl.knobs:FSDP"),
    Variant("deepspeed", "torch", "deepspeed", "deepspeed_impl.launch:DEEPSPEED", "deepspeed_impl.train",
            single_process=False, spans_nodes=True, traffic="zero",
            requires=(("deepspeed", "deepspeed"),),
            summary="DeepSpeed ZeRO stage 1, 2 or 3 (--zero-stage) under DeepSpeed's own launcher, from a config "
                    "file written per run", baseline="torch-single", options="deepspeed_impl.options",
            knobs="deepspeed_impl.knobs:ZERO",
            checkpoints=False, checkpoint_hint="engine.save_checkpoint is not wired into the harness yet",
            compiles=False),
    Variant("lightning", "torch", "lightning-fabric", "lightning_impl.launch:FABRIC", "lightning_impl.train",
            single_process=False, spans_nodes=True,
            requires=(("lightning_fabric", "lightning"),),
            summary="Lightning Fabric, strategy ddp, under `fabric run` (Lightning's own launcher)",
            baseline="torch-single", checkpoints=False,
            checkpoint_hint="fabric.save is not wired into the harness yet", compiles=False,
            knobs="lightning_impl.knobs:DDP", sync_phases=True),
    Variant("torch-dp", "torch", "torch", "bench.run.launch:PYTHON", "torch_impl.dp", single_process=True,
            spans_nodes=False, summary="PyTorch nn.DataParallel, one process over the visible GPUs (CPU: one slot)",
            cpu_max_per_node=1, cpu_limit_reason="DataParallel on CPU runs the plain module",
            baseline="torch-single", options="torch_impl.dp_options"),
    Variant("accelerate", "torch", "accelerate", "accelerate_impl.launch:ACCELERATE", "accelerate_impl.train",
            single_process=False, spans_nodes=True,
            requires=(("accelerate", "accelerate"),),
            summary="Hugging Face Accelerate under `accelerate launch` with an explicit config file",
            baseline="torch-single", independent=True, engine_entry="accelerate_impl.train:train", sync_phases=True,
            options="accelerate_impl.options", knobs="accelerate_impl.knobs:DDP"),
    Variant("tf-mirrored", "tensorflow", "tensorflow", "bench.run.launch:PYTHON", "tf_impl.mirrored",
            single_process=True, spans_nodes=False,
            summary="TensorFlow MirroredStrategy, one process over the GPUs (CPU: logical devices)",
            baseline="tf-single", knobs="tf_impl.knobs:MIRRORED"),
    Variant("tf-multiworker", "tensorflow", "tensorflow", "tf_impl.launch:TF_CONFIG_WORKERS",
            "tf_impl.multiworker", single_process=False, spans_nodes=True,
            summary="TensorFlow MultiWorkerMirroredStrategy, one worker per device slot (TF_CONFIG)",
            baseline="tf-single", knobs="tf_impl.knobs:MULTIWORKER"),
    Variant("tf-mirrored-fit", "tensorflow", "tensorflow", "bench.run.launch:PYTHON", "tf_impl.mirrored_fit",
            single_process=True, spans_nodes=False,
            summary="tf-mirrored trained with Keras' model.compile + model.fit under the strategy",
            baseline="tf-single", custom_loop="tf-mirrored", knobs="tf_impl.knobs:MIRRORED"),
    Variant("tf-multiworker-fit", "tensorflow", "tensorflow", "tf_impl.launch:TF_CONFIG_WORKERS",
            "tf_impl.multiworker_fit", single_process=False, spans_nodes=True,
            summary="tf-multiworker trained with Keras' model.compile + model.fit under the strategy (Keras 2: "
                    "tf-keras)", baseline="tf-single", custom_loop="tf-multiworker",
            knobs="tf_impl.knobs:MULTIWORKER_FIT",
            # Keras 2's jit_compile takes the step's all-reduce into the XLA cluster: on CPU it fails
            # (CollectiveReduceV2 has no XLA kernel), where the custom loop compiles only forward and backward.
            compiles=False,
            # Keras 3's fit fails under MultiWorkerMirroredStrategy (keras-team/keras#20585): tf.keras is Keras 2.
            env=(("TF_USE_LEGACY_KERAS", "1"),)),
    Variant("tf-multiworker-node", "tensorflow", "tensorflow", "tf_impl.launch:TF_CONFIG_WORKERS",
            "tf_impl.multiworker", single_process=False, spans_nodes=True, processes_per_node_fixed=1,
            in_default_sweep=False,
            summary="TensorFlow MultiWorkerMirroredStrategy, one worker per node mirroring its GPUs",
            cpu_max_per_node=1,
            cpu_limit_reason="MultiWorkerMirroredStrategy gives a worker one CPU device (it mirrors only GPUs)",
            baseline="tf-single"),
    Variant("tf-ps", "tensorflow", "tensorflow", "tf_impl.launch:TF_PS_TASKS", "tf_impl.ps",
            single_process=False, spans_nodes=True,
            summary="TensorFlow ParameterServerStrategy: a chief, a worker per device slot, a parameter server per "
                    "node (TF_CONFIG); ASYNCHRONOUS updates", baseline="tf-single", asynchronous=True,
            checkpoints=False, checkpoint_hint="its variables live on the parameter servers: not wired here",
            compiles=False, reads_files=False, profiles=False,
            # No batch can be held on a worker for a later step: a RemoteValue cannot be a scheduled function's
            # input (TensorFlow 2.21), and the coordinator picks the worker. Its input's cost is its twin's.
            input_phases=False),
    # The plain single-device loops with no wrapper: the baselines of "efficiency vs single".
    Variant("torch-single", "torch", "torch", "bench.run.launch:PYTHON", "torch_impl.single", single_process=True,
            spans_nodes=False, max_devices=1, summary="PyTorch, the loop on one device with no wrapper"),
    Variant("tf-single", "tensorflow", "tensorflow", "bench.run.launch:PYTHON", "tf_impl.single",
            single_process=True, spans_nodes=False, max_devices=1,
            summary="TensorFlow, the loop under the default (no-op) strategy"),
)}
# A framework that declares its variants beside its record (jax_impl/framework.py), and a framework of one's own
# (bench.spec.frameworks.PLUGINS_ENV), bring them in the module's VARIANTS.
VARIANTS.update({v.name: v for m in (*frameworks.package_modules(), *frameworks.plugin_modules())
                 for v in getattr(importlib.import_module(m), "VARIANTS", ())})


def current_framework(framework: str) -> str:
    """A stored row's framework by the name today's variants record (a wheel a framework's rows once named)."""
    return next((f.name for f in frameworks.registry().values() if framework in f.former_names), framework)


def family_of(framework: str) -> str:
    """The family of a stored row's `framework`: a row records its variant's distribution name ("torch", "deepspeed",
    "tensorflow", ...), not its family. The harness asks Variant.family; only what reads rows back needs this.
    A name no variant records counts as the first framework's (PyTorch's), like its wrappers'."""
    return next((v.family for v in VARIANTS.values() if v.framework == current_framework(framework)),
                frameworks.names()[0])


# What `bench regress` and `bench overhead` measure unless told: the approach most users start from.
DEFAULT_COMPARED = "torch-ddp"
SAMPLER_OVERHEAD_VARIANT = "torch-ddp"  # `bench overhead --of sampler`: two ranks that all-reduce every step
# Accelerate's plugins hand its loop to another approach's traffic (Variant.traffic).
PLUGIN_TRAFFIC = {"fsdp": "fsdp", "deepspeed": "zero"}


def overhead_pairs() -> dict[str, tuple[str, str]]:
    """bench overhead: per family, the harness run and the plain loop (probes/) it is compared with."""
    return {f.name: f.plain_loop for f in frameworks.registry().values() if f.plain_loop}


def probed_collectives() -> tuple[str, ...]:
    """The rows' frameworks whose all-reduce the collectives probe (bench.studies.microbench) measures, so that their
    communication floor is priced from it."""
    return tuple(d for f in frameworks.registry().values() for d in f.probed_collectives)


def panels() -> tuple[str, ...]:
    """The panels of a sweep's line plots, each a group of approaches a reader compares directly, so that no panel
    carries more than a handful of legend entries: per framework its own approaches, then its wrappers'."""
    return tuple(p for f in frameworks.registry().values() for p in f.panels)


def panel(framework: str) -> str:
    """The panel (panels()) a row's `framework` is drawn in."""
    return frameworks.get(family_of(framework)).panel(current_framework(framework))


# `bench gpu-check` (bench.studies.gpu_check): each approach once on one GPU, most telling first, as (variant, the
# task fields of its options, what it needs installed beyond its own framework's distribution, the seconds it is
# expected to take on one H100 at the check's short timing: start-up dominates). The first is the plain loop the
# check's memory-cap, energy and compile steps run too. torch-ddp-static is torch-ddp's module with one setting.
GPU_CHECK_RUNS = (
    ("torch-single", {}, (), 30), ("torch-dp", {}, (), 25), ("torch-ddp", {}, (), 30), ("torch-fsdp", {}, (), 30),
    ("deepspeed", {"zero_stage": 1}, (), 40), ("deepspeed", {"zero_stage": 2}, (), 40),
    ("deepspeed", {"zero_stage": 3}, (), 45), ("lightning", {}, ("click",), 30), ("accelerate", {}, (), 30),
    ("accelerate", {"accelerate_plugin": "fsdp"}, (), 30),
    ("accelerate", {"accelerate_plugin": "deepspeed", "zero_stage": 2}, ("deepspeed",), 40),
    # TensorFlow's GPU build cannot be carried to a lent box (≈3.4 GB): the check runs these where it is installed.
    ("tf-single", {}, (), 60), ("tf-mirrored", {}, (), 60),
)


@dataclass(frozen=True)
class Switch:
    """A fast-path switch the audit measures once per machine (bench.studies.audit): the framework's plain
    single-device loop trained with it on and off, through the environment variable its ranks read."""
    name: str
    variant: str            # the run that measures it: the framework's baseline, whose family the switch is
    env: str                # the variable, "1" on and "0" off
    device_types: tuple[str, ...]
    chosen: str             # "module:function" of (device_type) -> whether dtbench's fast path turns it on

    @property
    def family(self) -> str:
        return VARIANTS[self.variant].family


FAST_PATH_SWITCHES = (
    Switch("oneDNN kernels", "tf-single", "TF_ENABLE_ONEDNN_OPTS", ("cpu",), "tf_impl.fast_path:onednn_chosen"),
    Switch("channels_last", "torch-single", "DTBENCH_CHANNELS_LAST", ("cpu", "cuda"),
           "torch_impl.fast_path:channels_last_chosen"),
    # PyTorch's CUDA switches (torch_impl/fast_path.py CUDA_SWITCHES): measured once per GPU model.
    Switch("cuDNN autotuning", "torch-single", "DTBENCH_CUDNN_BENCHMARK", ("cuda",),
           "torch_impl.fast_path:cuda_switch_chosen"),
    Switch("TF32", "torch-single", "DTBENCH_TF32", ("cuda",), "torch_impl.fast_path:cuda_switch_chosen"),
    Switch("fused optimizer", "torch-single", "DTBENCH_FUSED_OPTIMIZER", ("cuda",),
           "torch_impl.fast_path:cuda_switch_chosen"),
)


def check_engine(name: str) -> None:
    if name not in ENGINES:
        raise SpecError(f"unknown engine {name!r}: choose one of {', '.join(ENGINES)}")


def get_variant(name: str) -> Variant:
    if name not in VARIANTS:
        raise SpecError(f"unknown variant {name!r}: choose one of {', '.join(VARIANTS)} (see `{command()} list`)")
    return VARIANTS[name]


def default_variants() -> list[Variant]:
    return [v for v in VARIANTS.values() if v.in_default_sweep]


def not_applicable(variant: Variant, device_type: str, nodes: int, devices_per_node: int) -> str | None:
    """Why this variant cannot run this topology (None when it can)."""
    if nodes > 1 and not variant.spans_nodes:
        return f"{variant.name} is a single process and cannot span {nodes} nodes"
    if variant.max_devices is not None and nodes * devices_per_node > variant.max_devices:
        return f"{variant.name} is a single-device baseline"
    limit = variant.cpu_max_per_node if device_type == "cpu" else None
    if limit is not None and devices_per_node > limit:
        return f"{variant.name} on cpu runs at most {limit} device slot(s) per node: {variant.cpu_limit_reason}"
    return None
