"""A run spec: one variant on one topology for one task, checked before anything starts."""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from bench.results.key import RunKey, config_key, settings_differ
from bench.hosts.interface import Interface
from bench.spec import devices, models, options
from bench.spec.devices import Machine, Placement
from bench.spec.frameworks import load
from bench.spec.task import SpecError, TaskSpec
from bench.spec.variants import VARIANTS, Variant, check_engine, not_applicable
from bench.worker import CHECKPOINT_DIR, manifest


@dataclass(frozen=True)
class RunSpec:
    variant: Variant
    task: TaskSpec
    device_type: str
    nodes: int = 1
    devices_per_node: int = 1
    cores_per_slot: int = 1
    timeout_s: float = 900.0
    # Real multi-host: this host runs only node `host_node` and meets the others at master_addr.
    host_node: int | None = None
    master_addr: str = "127.0.0.1"
    master_port: int | None = None
    # The interface this host's collectives use on a multi-host run (bench.hosts.interface), and its address.
    interface: "Interface | None" = None
    # Gradient synchronisation off (each replica trains its own shard): the no-communication bound.
    independent: bool = False
    # What starts the ranks: torchrun (the variant's own launcher), or ray | spark | dask through
    # bench.engines; engine_address joins an existing cluster instead of starting a local one.
    engine: str = "torchrun"
    engine_address: str | None = None
    # --resume-from: the folder of the run this one continues from its last checkpoint.
    resume_from: Path | None = None
    # --profile: the framework's profiler over a few windows after the warm-up (bench.worker.profile).
    profile: bool = False
    # --malloc: glibc's malloc with a fixed mmap threshold and no trimming ("tuned"), or as glibc ships it.
    malloc: str = "tuned"
    # --as-shipped: every framework on its own defaults, none of the fast-path switches dtbench sets
    # (TensorFlow's oneDNN on x86, PyTorch's cuDNN autotuning, TF32 and channels_last on CUDA).
    as_shipped: bool = False
    # --sample-every: seconds between the samples of what the run did over time (bench.run.sampler); 0: none.
    # `bench run` and `bench sweep` sample every 0.5 s; the harness's own measurements (overhead, maxbatch
    # probes, regress duets) leave it off unless asked.
    sample_every_s: float = 0.0
    # --mlflow: rank 0 saves the trained model as an MLflow model in the run folder, for the harness to log.
    log_model: bool = False

    @property
    def on_engine(self) -> bool:
        return self.engine != "torchrun"

    @property
    def row_engine(self) -> str:
        """The engine a row records: variants no engine runs keep "local" (their own launcher is all there is)."""
        return self.engine if self.variant.engine_entry else "local"

    @property
    def all_local(self) -> bool:
        """Every node on this host: every listening socket can stay on loopback."""
        return self.host_node is None and self.engine_address is None

    @property
    def local_nodes(self) -> list[int]:
        return list(range(self.nodes)) if self.host_node is None else [self.host_node]

    @property
    def local_ranks(self) -> list[int]:
        per_node = self.processes_per_node
        return [n * per_node + i for n in self.local_nodes for i in range(per_node)]

    @property
    def launcher(self):
        """The variant's Launcher (bench.run.launch), from its package's launch.py."""
        return self.variant.launcher_spec

    @property
    def reporting_ranks(self) -> list[int]:
        """The ranks on this host that train and report a result: the chief alone where the others serve."""
        return [0] if self.launcher.chief_reports else self.local_ranks

    @property
    def world_size(self) -> int:
        return self.nodes * self.devices_per_node

    @property
    def processes_per_node(self) -> int:
        return self.variant.processes_per_node(self.devices_per_node)

    @property
    def key(self) -> RunKey:
        return config_key({"variant": self.variant.name, "engine": self.row_engine, "device_type": self.device_type,
                           "nodes": self.nodes, "devices_per_node": self.devices_per_node,
                           "independent": self.independent, "task": self.task.to_dict(),
                           "as_shipped": self.as_shipped})

    def inapplicable(self) -> str | None:
        if refused := models.refusal(self.task.model.name, models.parse(self.task.model.name).framework, self.variant):
            return refused
        return not_applicable(self.variant, self.device_type, self.nodes, self.devices_per_node)

    def check_resumable(self) -> None:
        """A resumed run continues the same training: same variant, world and task, from a saved checkpoint."""
        spec_file, checkpoint = self.resume_from / "spec.json", self.resume_from / CHECKPOINT_DIR
        if not spec_file.exists():
            raise SpecError(f"--resume-from {self.resume_from}: not a run folder (no spec.json): pass a folder "
                            "under OUT/runs/")
        if not checkpoint.is_dir() or not any(checkpoint.iterdir()):
            raise SpecError(f"--resume-from {self.resume_from}: it saved no checkpoint (run it with "
                            "--checkpoint-every-epoch, and let it finish an epoch)")
        damaged = manifest.damage(checkpoint)
        if damaged:
            raise SpecError(f"--resume-from {self.resume_from}: its checkpoint is damaged: {damaged}: resume from an "
                            "intact copy of the run folder")
        try:
            old = json.loads(spec_file.read_text())
        except OSError as exc:
            raise SpecError(f"--resume-from {self.resume_from}: its spec.json cannot be read ({exc.strerror}): pass "
                            "a run folder you can read") from None
        except ValueError as exc:  # UnicodeDecodeError too
            raise SpecError(f"--resume-from {self.resume_from}: its spec.json is not JSON ({exc}): pass the folder of "
                            "a run that wrote one") from None
        if not isinstance(old, dict) or not isinstance(old.get("task"), dict):
            raise SpecError(f"--resume-from {self.resume_from}: its spec.json is no run's spec (no task in it): pass "
                            "a folder under OUT/runs/")
        differ = [f"{name} {old.get(name)!r} there, {value!r} here" for name, value in
                  (("variant", self.variant.name), ("world_size", self.world_size), ("nodes", self.nodes),
                   ("device_type", self.device_type)) if old.get(name) != value]
        try:  # the task as that run's spec.json wrote it: the tree, or an older run's flat settings
            theirs = TaskSpec.from_dict(old["task"]).to_dict() if "recipe" in old["task"] else old["task"]
        except (TypeError, KeyError, AttributeError, ValueError) as exc:
            raise SpecError(f"--resume-from {self.resume_from}: its spec.json holds no task this dtbench reads "
                            f"({exc}): resume it with the dtbench that ran it") from None
        mine = self.task.to_dict()
        differ += [f"{name} {theirs.get(name)!r} there, {mine[name]!r} here" for name in settings_differ(mine, theirs)]
        if differ:
            raise SpecError(f"--resume-from {self.resume_from} trained another configuration ({'; '.join(differ)}): "
                            "pass the options it ran with")

    def check(self, machine: Machine) -> Placement:
        """Everything that can be wrong with the request, as one-line errors, before anything starts."""
        if missing := self.variant.not_installed():
            raise SpecError(missing)
        if self.nodes < 1 or self.devices_per_node < 1:
            raise SpecError("devices and nodes must be at least 1")
        if self.task.recipe.global_batch % self.world_size:
            raise SpecError(f"global batch {self.task.recipe.global_batch} does not divide by world size "
                            f"{self.world_size}: pass --global-batch a multiple of {self.world_size}")
        if self.task.recipe.precision == "fp16" and self.device_type != "cuda":
            raise SpecError("fp16 needs CUDA: use --precision bf16 or fp32 on CPU")
        if self.independent and not self.variant.independent:
            raise SpecError(f"{self.variant.name} has no independent (no gradient sync) mode: "
                            "use torch-ddp or accelerate")
        if self.profile and not self.variant.profiles:
            profiled = ", ".join(v.name for v in VARIANTS.values() if v.profiles)
            raise SpecError(f"--profile is not wired for {self.variant.name}: drop it, or profile one of {profiled}")
        if self.task.options.compile and not self.variant.compiles:
            raise SpecError(f"--compile is not wired for {self.variant.name} yet: drop it, or use torch-ddp --compile")
        if self.task.options.compile and (needs := self.variant.plugin.compile_problem):
            if problem := load(needs)():
                raise SpecError(problem)
        check_engine(self.engine)
        if self.resume_from is not None:
            self.check_resumable()
        if self.on_engine and not self.variant.engine_entry:
            engines_ok = ", ".join(v.name for v in VARIANTS.values() if v.engine_entry)
            raise SpecError(f"{self.variant.name} runs only under its own launcher: --engine {self.engine} runs "
                            f"{engines_ok}")
        if self.task.options.checkpoint_every_epoch and not self.variant.checkpoints:
            raise SpecError(f"{self.variant.name} does not checkpoint yet ({self.variant.checkpoint_hint}): "
                            "drop --checkpoint-every-epoch, or use torch-ddp")
        options.check(self)
        if self.task.reads_files and not self.variant.reads_files:
            raise SpecError(f"{self.variant.name} reads the in-memory input only (its workers are TF servers "
                            "running the chief's graphs, where the file pipeline's Python S3 reader cannot run): "
                            "use --input memory")
        if self.engine == "dask" and self.task.data.loader_workers:
            raise SpecError("--engine dask runs each rank in a daemonic worker process, which cannot start "
                            "DataLoader workers: use --loader-workers 0 there, or another engine")
        if self.on_engine and self.host_node is not None:
            raise SpecError(f"--engine {self.engine} starts every node itself: drop --node-rank, or use "
                            "the engine's cluster address (--ray-address, --spark-master, --dask-scheduler)")
        if self.host_node is not None:
            if not 0 <= self.host_node < self.nodes:
                raise SpecError(f"--node-rank {self.host_node} is outside 0..{self.nodes - 1}")
            if self.master_port is None:
                raise SpecError("a multi-host run needs --master-port P, the same on every host")
        placement = devices.place(self.device_type, len(self.local_nodes), self.devices_per_node, machine,
                                  self.cores_per_slot, self.processes_per_node)
        if self.host_node is None:
            return placement
        [plan] = placement.nodes
        return dataclasses.replace(placement, nodes=(dataclasses.replace(plan, node_rank=self.host_node),))
