"""Every option of every command as a typed field of a settings layer, declared once with its help, default and
the commands that take it (bench.spec.setting); the task's own settings are TaskSpec's fields (bench.spec.task),
an approach's its options module's, a metric's its module's. bench.cli composes a command's parser from its
layers, in order; a field's name is where its value lands, and a field named as one of RunSpec's sets it on
every run of the command (bench.request.run_settings)."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bench import command as command_name, install
from bench.history import MAX_PVALUE
from bench.metrics.cost import price
from bench.run.sampler import DEFAULT_INTERVAL_S
from bench.spec import devices, knobs
from bench.spec import frameworks
from bench.spec.setting import setting
from bench.spec.task import DEFAULT_TASK, PRESETS, SpecError
from bench.spec.variants import DEFAULT_COMPARED, ENGINES, VARIANTS, check_engine, get_variant
from bench.studies.gpu_check import DEFAULT_BUDGET_S

DEFAULT_OUT = Path("results/latest")
# The commands that train a task: each takes the task's settings and where and how long its runs go.
TASK_COMMANDS = ("run", "sweep", "maxbatch", "tune", "overhead", "audit")
FAMILY_CHOICES = ("both", *frameworks.names())  # --framework of overhead and audit
ONE_VARIANT = f"one of {', '.join(VARIANTS)}"
SPLIT_OVER = "nodes the devices are split over (fake nodes on this host unless --node-rank is given)"
FAKE_NODES = "fake nodes the devices are split over (default 1)"
MIXED = "--resume over rows another code revision wrote (their runs count as done)"


def _engine_help(several: bool) -> str:
    return (f"what starts the ranks of torch-ddp and accelerate: {' | '.join(ENGINES)} "
            + ("(comma-separated: each is a dimension of the report) " if several else "")
            + "(default torchrun: the variant's own launcher)")


class Settings:
    """A layer of settings: its fields, and `check`, which refuses everything that can be wrong with them alone
    (SpecError: one line naming the fix). What needs two layers is bench.request.command's."""

    def check(self, command: str) -> None:
        """Nothing of these settings alone can be wrong."""


@dataclass(frozen=True)
class Logging(Settings):
    """Before the command, and after it as well: `dtbench run -v ...`."""
    verbose: bool = field(default=False, metadata=setting("debug logging", option=("-v", "--verbose")))


@dataclass(frozen=True)
class Version(Settings):
    version: str = field(default="", metadata=setting(action="version",
                                                      version=lambda: f"dtbench {install.version()}"))


@dataclass(frozen=True)
class Plan(Settings):
    """What to run and how often: the approaches, the device counts, the repeats, resuming."""
    variant: str | None = field(default=None, metadata=setting(ONE_VARIANT, required=True,
                                                                commands=("run", "maxbatch")))
    variants: str | None = field(default="all", metadata=setting(
        "comma-separated variant names (default all)", commands=("sweep", "tune"),
        vary={"tune": dict(help="comma-separated approaches with knobs (`bench list`)", required=True, default=None)}))
    max_devices: int = field(default=2, metadata=setting("largest device count (default 2)", commands=("sweep",)))
    devices: int = field(default=1, metadata=setting(
        "device slots in all (world size)", commands=("run", "maxbatch", "tune", "collectives"),
        vary={"tune": dict(default=2, help="device slots in all (default 2)"),
              "collectives": dict(default=2, help="ranks in all (default 2)")}))
    device_counts: str | None = field(default=None, metadata=setting(
        "only these device counts (e.g. 8, or 1,8) instead of 1, 2, 4 ... --max-devices", option="--devices",
        metavar="N[,M...]", commands=("sweep",)))
    function: str | None = field(default=None, metadata=setting(
        "your own training function instead of the approaches, as MODULE:NAME (it calls dtbench.step(samples) after "
        "each step): run under each --engine and device count, ranked as the approaches are", metavar="MODULE:NAME",
        commands=("sweep",)))
    models: str | None = field(default=None, metadata=setting(
        "sweep each of these models (any --model name) in turn: a verdict and table per model, and throughput per "
        "device against model size", metavar="A,B,...", commands=("sweep",)))
    nodes: int = field(default=1, metadata=setting(
        SPLIT_OVER, option=("--nodes", "--nnodes"), commands=("run", "sweep", "maxbatch", "tune", "collectives"),
        vary={"sweep": dict(option="--nodes", help="fake nodes (default 1)"),
              "maxbatch": dict(option="--nodes", help=FAKE_NODES), "tune": dict(option="--nodes", help=FAKE_NODES),
              "collectives": dict(help="nodes the ranks are split over (fake nodes on this host unless --node-rank "
                                       "is given)")}))
    max_batch: int = field(default=65536, metadata=setting("stop doubling here (default 65536)",
                                                           commands=("maxbatch",)))
    resolution: int = field(default=1, metadata=setting(
        "stop bisecting when what fits and what does not are this many samples a device apart (default 1: exact)",
        commands=("maxbatch",)))
    budget: float | None = field(default=None, metadata=setting("the whole tuning's time", metavar="MINUTES",
                                                                required=True, commands=("tune",)))
    repeats: int = field(default=1, metadata=setting(
        "run the whole sweep R times, round-robin; the report folds repeats (default 1)", commands=("sweep", "tune"),
        vary={"tune": dict(default=3,
                           help="full-length runs of each approach's best and of its defaults (default 3)")}))
    tune: float | None = field(default=None, metadata=setting(
        "then `bench tune` each approach with knobs at the most devices within MINUTES: the report ranks them at "
        "their best beside as shipped", metavar="MINUTES", commands=("sweep",)))
    # The knobs a tuning races only when asked (bench.spec.knobs: Knob.opt_in names these).
    tune_batch: bool = field(default=False, metadata=setting(
        "race the per-device batch too (the batch_scale knob: 0.5, 2 and 4 times the recipe's, the learning rate by "
        "its rule): it changes the recipe, so a setting ranks only where its test accuracy reaches the task's "
        "target; under --device-memory a batch that does not fit drops out", commands=("sweep", "tune")))
    tune_compile: bool = field(default=False, metadata=setting(
        "race compile=true too (torch.compile / XLA): each compiled run pays its compilation, which the race prices "
        "from the defaults' uncompiled runs, so the budget may run over by it", commands=("sweep", "tune")))
    pairing: str = field(default="turns", metadata=setting(
        "how the race pairs a setting's runs with its defaults': turns (default: duets taking turns window by "
        "window), interleaved (one after the other), none (short runs one after another, each on its own)",
        choices=("turns", "interleaved", "none"), commands=("tune",)))
    resume: bool = field(default=False, metadata=setting(
        "run only what --out lacks: configurations without a finished row of this revision and task",
        commands=("sweep", "tune"),
        vary={"tune": dict(help="go on with a stopped tuning of the same request in --out: its finished runs count "
                                "as run, their time as spent")}))
    allow_mixed_revisions: bool = field(default=False, metadata=setting(MIXED, commands=("sweep", "tune")))
    dry_run: bool = field(default=False, metadata=setting(
        "print the whole plan and run nothing: every run's processes, commands, GPUs, cores, rendezvous, TF_CONFIG "
        "and Accelerate config, and an estimate from --out's earlier rows", commands=("sweep",)))
    assume_gpus: int | None = field(default=None, metadata=setting(
        "with --dry-run: plan for a box with N GPUs (this machine's cores)", metavar="N", commands=("sweep",)))
    analysis: bool = field(default=True, metadata=setting(
        "skip the scaling analysis: single-device baselines, independent (no-sync) runs, the collective "
        "microbenchmarks", option="--no-analysis", action="store_false", commands=("sweep",)))

    def named_variants(self) -> list[str]:
        return [n.strip() for n in (self.variants or "").split(",") if n.strip()]

    def opt_ins(self) -> tuple[str, ...]:
        """The flags given of the knobs a tuning races only when asked (--tune-batch, --tune-compile)."""
        return tuple(k.opt_in for k in knobs.COMMON if k.opt_in and getattr(self, k.opt_in[2:].replace("-", "_")))

    def check(self, command: str) -> None:
        if command in ("run", "maxbatch"):
            get_variant(self.variant)
        if command in ("sweep", "tune") and self.allow_mixed_revisions and not self.resume:
            raise SpecError("--allow-mixed-revisions goes with --resume")
        if command == "sweep":
            if self.variants not in ("all", ""):
                for name in self.variants.split(","):
                    get_variant(name.strip())
            if self.repeats < 1:
                raise SpecError(f"repeats must be at least 1 (got {self.repeats})")
            if (asked := self.opt_ins()) and not self.tune:
                raise SpecError(f"{' '.join(asked)} goes with --tune MINUTES: raced with each approach's knobs")
            if self.tune is not None and not self.tune > 0:
                raise SpecError(f"--tune {self.tune:g}: give the tuning's minutes above 0, e.g. --tune 30")
            if self.assume_gpus is not None and not self.dry_run:
                raise SpecError("--assume-gpus only plans: add --dry-run (a real sweep uses the GPUs it finds)")
            if self.assume_gpus is not None and self.assume_gpus < 1:
                raise SpecError(f"--assume-gpus {self.assume_gpus}: assume at least 1 GPU, or drop it to plan for "
                                "this machine")
        if command == "tune":
            if not self.budget > 0 or self.repeats < 1:
                raise SpecError(f"--budget {self.budget:g} --repeats {self.repeats}: give minutes above 0 and at least "
                                "one repeat, e.g. --budget 30 --repeats 3")
            for name in self.named_variants():
                if not knobs.declared(get_variant(name).knobs):
                    raise SpecError(f"{name} has no knobs to tune: choose among "
                                    f"{', '.join(v.name for v in VARIANTS.values() if v.knobs)}")
        if command == "collectives" and self.devices < 2:
            raise SpecError(f"--devices {self.devices}: a collective needs at least 2 ranks")
        if command in ("run", "maxbatch", "tune", "collectives"):
            devices.check_topology(self.devices, self.nodes)
        if command == "maxbatch":
            if self.max_batch < self.devices:
                raise SpecError(f"--max-batch {self.max_batch} is below one sample a device: give at least "
                                f"{self.devices}")
            if self.resolution < 1:
                raise SpecError(f"--resolution {self.resolution}: at least 1 sample a device")


@dataclass(frozen=True)
class Hosts(Settings):
    """Real multi-host: this host's share of a run spread over several (bench run, bench collectives)."""
    host_node: int | None = field(default=None, metadata=setting(
        "real multi-host: run only this node's share here", option="--node-rank", metavar="NODE_RANK"))
    master_addr: str = field(default="127.0.0.1", metadata=setting("real multi-host: node 0's address"))
    master_port: int | None = field(default=None, metadata=setting(
        "real multi-host: a port free on node 0 (the same on every host)"))
    ifname: str | None = field(default=None, metadata=setting(
        "real multi-host: the network interface the collectives use (default: the one this host's route to "
        "--master-addr leaves by)"))

    def check(self, command: str) -> None:
        if self.ifname and self.host_node is None:
            raise SpecError("--ifname names a real multi-host run's interface: give --node-rank too, or drop it")


@dataclass(frozen=True)
class OneRun(Settings):
    """What only one run takes: where it resumes, its synchronisation off, its knobs."""
    resume_from: Path | None = field(default=None, metadata=setting(
        "continue that run (OUT/runs/ID, run with --checkpoint-every-epoch) from its last checkpoint",
        metavar="RUN_DIR"))
    independent: bool = field(default=False, metadata=setting(
        "gradient synchronisation off (torch-ddp, accelerate): the no-communication bound"))
    set: list[str] | None = field(default=None, metadata=setting(
        "one of the approach's own knobs, set for this run (repeatable; `bench list` names them, with the "
        "framework's default and the values worth trying)", action="append", metavar="NAME=VALUE"))


@dataclass(frozen=True)
class Execution(Settings):
    """How each rank's process runs: its allocator, the fast path, the profiler."""
    malloc: str = field(default="tuned", metadata=setting(
        "tuned (default): glibc's malloc with a fixed mmap threshold and no trimming, so a step's tensors reuse the "
        "heap instead of faulting in fresh pages; glibc: as glibc ships it", choices=("tuned", "glibc"),
        commands=("run", "sweep", "tune")))
    as_shipped: bool = field(default=False, metadata=setting(
        "run every framework on its own defaults instead of its fast path for this machine (TensorFlow's oneDNN "
        "kernels on x86, PyTorch's cuDNN autotuning, TF32 and channels_last on CUDA); rows say which, and the "
        "report names them \"(as shipped)\"", commands=("run", "sweep")))
    profile: bool = field(default=False, metadata=setting(
        "run the framework's profiler over 2 windows after the warm-up (not timed): a trace in the run folder's "
        "profile/ and where the step goes in the row and the report", commands=("run", "sweep")))


@dataclass(frozen=True)
class Engines(Settings):
    """What starts the ranks, and where each run is also logged."""
    engine: str = field(default="torchrun", metadata=setting(_engine_help(several=False), vary={
        "sweep": dict(help=_engine_help(several=True), option=("--engine", "--engines"))}))
    ray_address: str | None = field(default=None, metadata=setting(
        "--engine ray: an existing Ray cluster (default: a local one per run)"))
    spark_master: str | None = field(default=None, metadata=setting(
        "--engine spark: a master URL, e.g. local-cluster[2,1,1024] (default: a local session, TorchDistributor "
        "local_mode)"))
    dask_scheduler: str | None = field(default=None, metadata=setting(
        "--engine dask: a scheduler address (default: a LocalCluster per run)"))
    mlflow: str | None = field(default=None, metadata=setting(
        "also log each run to MLflow, e.g. sqlite:///mlruns.db; without a URI to MLFLOW_TRACKING_URI (the "
        "experiment: MLFLOW_EXPERIMENT_NAME, else dtbench; spec as params, figures as metrics, the trained model as "
        "an MLflow model)", metavar="URI", nargs="?", const=""))

    def names(self) -> list[str]:
        return [e.strip() for e in self.engine.split(",") if e.strip()]

    def check(self, command: str) -> None:
        for name in self.names():
            check_engine(name)
        if command == "run" and len(self.names()) != 1:
            raise SpecError("bench run takes one --engine: use bench sweep to compare several")


@dataclass(frozen=True)
class TaskChoice(Settings):
    """The task preset the task's own settings (bench.spec.task) then override."""
    task: str | None = field(default=None, metadata=setting(
        f"task preset: {', '.join(PRESETS)} (default: {DEFAULT_TASK['cpu']} on a CPU, the small CNN; "
        f"{DEFAULT_TASK['cuda']} on GPUs, ResNet-50 at 224 px in bf16)", commands=TASK_COMMANDS))


@dataclass(frozen=True)
class Placement(Settings):
    """Your own model, and where and how long each run goes."""
    model_module: str | None = field(default=None, metadata=setting(
        "your own model: FUNCTION(channels=, classes=, image_size=) returns a torch.nn.Module or a Keras model; the "
        "approaches of its framework train it", metavar="PKG.MODULE:FUNCTION", commands=TASK_COMMANDS))
    device_type: str = field(default="auto", metadata=setting(
        "cuda when GPUs are visible, else cpu (default: auto)", choices=("auto", "cpu", "cuda"),
        commands=(*TASK_COMMANDS, "peak", "collectives"),
        vary={"peak": dict(help=None), "collectives": dict(help=None)}))
    cores_per_slot: int = field(default=1, metadata=setting(
        "CPU cores per device slot (default 1)", commands=(*TASK_COMMANDS, "peak"),
        vary={"peak": dict(help="CPU cores of the slot (default 1)")}))
    timeout_s: float = field(default=900.0, metadata=setting(
        "seconds before a run is killed (default 900)", option="--timeout", metavar="TIMEOUT",
        commands=(*TASK_COMMANDS, "collectives"),
        vary={"collectives": dict(default=300.0, help="seconds before it is killed (default 300)")}))
    sample_every_s: float = field(default=DEFAULT_INTERVAL_S, metadata=setting(
        "sample each rank's memory and CPU (and each GPU) this often into the run folder's time series and its plot "
        f"(default {DEFAULT_INTERVAL_S}; 0: off)", option="--sample-every", metavar="SECONDS", commands=TASK_COMMANDS))
    # overhead's own folder; its help, as before, names the common default
    out: Path = field(default=DEFAULT_OUT, metadata=setting(
        "results directory (default results/latest)", commands=(*TASK_COMMANDS, "peak", "collectives"),
        vary={"overhead": dict(default=Path("results/latest/overhead"))}))


@dataclass(frozen=True)
class Studies(Settings):
    """bench overhead and bench audit: whose harness or switches, and how many rounds."""
    framework: str = field(default="both", metadata=setting(
        "whose harness run and plain loop to compare (default both: each that builds the model, their rounds "
        "interleaved)", choices=FAMILY_CHOICES, commands=("overhead", "audit"),
        vary={"audit": dict(help="whose switches (default both: each that has one for this device type)")}))
    of: str = field(default="harness", metadata=setting(
        "harness: the harness against a plain loop; sampler: torch-ddp on 2 slots unsampled against --sample-every "
        "0.5 and 0.05, rounds in rotating order", choices=("harness", "sampler"), commands=("overhead",)))
    repeats: int = field(default=3, metadata=setting(
        "rounds of the sides, or of the sampler's three (default 3)", commands=("overhead",)))
    again: bool = field(default=False, metadata=setting(
        "measure even where this machine's cache already holds the figures", commands=("audit",)))


@dataclass(frozen=True)
class Folder(Settings):
    """The results folder a report or a projection reads."""
    dir: Path = field(default=DEFAULT_OUT, metadata=setting(positional=True, nargs="?"))


@dataclass(frozen=True)
class Compare(Settings):
    dirs: list[Path] = field(default_factory=list, metadata=setting(
        "two or more results folders, one per machine", positional=True, nargs="*", metavar="DIR", type=Path,
        default=None))
    out: Path = field(default=Path("results/compare"), metadata=setting(
        "where compare.md and compare.html go (default results/compare, rewritten each time)"))
    prices: list[float] | None = field(default=None, metadata=setting(
        "what one device of each machine costs an hour, one price per DIR in their order, after the folders: "
        "samples per dollar in the table", option="--price-per-device-hour", type=price, nargs="+", metavar="USD"))

    def check(self, command: str) -> None:
        folders = [Path(d) for d in self.dirs or ()]
        if len(folders) < 2:
            raise SpecError(f"{command_name()} compare needs two or more results folders, one per machine: e.g. "
                            f"{command_name()} compare results/reference-cpu results/reference-h100-default")
        twice = [str(d) for d in folders if sum(d.resolve() == other.resolve() for other in folders) > 1]
        if twice:
            raise SpecError(f"{twice[0]} is given more than once: name each machine's folder once")
        if self.prices and len(self.prices) != len(folders):
            raise SpecError(f"--price-per-device-hour has {len(self.prices)} prices for {len(folders)} folders: "
                            "give one per folder, in the folders' order")


@dataclass(frozen=True)
class Project(Settings):
    """The link between nodes and within one that a projection assumes."""
    devices_per_node: int | None = field(default=None, metadata=setting(
        "devices a node: beyond them the link is --alpha-us/--busbw-gbps (default: the most devices the sweep ran)",
        metavar="N"))
    alpha_us: float | None = field(default=None, metadata=setting(
        "the link between nodes: a collective's latency at 2 ranks, microseconds (with --busbw-gbps)", metavar="US"))
    busbw_gbps: float | None = field(default=None, metadata=setting(
        "the link between nodes: its bus bandwidth, GB/s as nccl-tests reports it (with --alpha-us)",
        metavar="GB/S"))
    between_nodes: Path | None = field(default=None, metadata=setting(
        "the link between nodes as measured: a folder `bench collectives --nnodes 2 --node-rank R` wrote across two "
        "hosts (instead of --alpha-us/--busbw-gbps)", metavar="DIR"))
    network: str | None = field(default=None, metadata=setting(
        "the link between nodes by name: ib-8x400g, ib-8x200g, ethernet-100g, ethernet-25g (sources: "
        "docs/projection.md)", metavar="NAME"))
    within_node: str | None = field(default=None, metadata=setting(
        "a node's link by name in place of the one measured here: nvlink-a100, nvlink-h100 (8 devices a node unless "
        "--devices-per-node)", metavar="NAME"))

    def check(self, command: str) -> None:
        if (self.alpha_us is None) != (self.busbw_gbps is None):
            raise SpecError("give the link between nodes whole: --alpha-us US and --busbw-gbps GB/S together")
        if (self.alpha_us is not None and self.alpha_us < 0) or (self.busbw_gbps is not None and self.busbw_gbps <= 0):
            raise SpecError("--alpha-us must be 0 or more and --busbw-gbps more than 0")
        if self.devices_per_node is not None and self.devices_per_node < 1:
            raise SpecError(f"--devices-per-node must be at least 1 (got {self.devices_per_node})")
        if sum(x is not None for x in (self.between_nodes, self.busbw_gbps, self.network)) > 1:
            raise SpecError("name the link between nodes once: --network NAME, --between-nodes DIR or "
                            "--alpha-us/--busbw-gbps")


@dataclass(frozen=True)
class Data(Settings):
    """bench data: the tasks whose datasets to prepare, or export-images and its folder."""
    tasks: tuple[str, ...] = field(default=("quick", "default"), metadata=setting(positional=True, nargs="*"))
    task: str = field(default="default", metadata=setting("export-images: the task whose dataset to write"))
    format: str = field(default="png", metadata=setting("export-images: png (lossless, default) or jpeg",
                                                        choices=("png", "jpeg")))
    install: bool = field(default=False, metadata=setting("install Debian's dataset-fashion-mnist if missing"))
    download: bool = field(default=False, metadata=setting("opt-in: download Fashion-MNIST (needs internet)"))
    data_dir: str | None = field(default=None, metadata=setting())

    def check(self, command: str) -> None:
        if self.tasks[:1] == ["export-images"] and len(self.tasks) != 2:
            raise SpecError(f"usage: {command_name()} data export-images --task T [--format png|jpeg] "
                            "DIR|s3://BUCKET/PREFIX")


@dataclass(frozen=True)
class Regress(Settings):
    """bench regress: what to compare, the runs of each side, and what counts as a slowdown."""
    against: str | None = field(default=None, metadata=setting(
        "A/B on this machine: REV (baseline) vs the current tree", metavar="REV"))
    baseline: str | None = field(default=None, metadata=setting("a stored results file (or directory)",
                                                                metavar="OLD.jsonl"))
    current: str | None = field(default=None, metadata=setting("the results file to judge against it",
                                                               metavar="NEW.jsonl"))
    duets: bool = field(default=False, metadata=setting(
        "with --baseline/--current: judge the files' runs as duets (the baseline/ and current/ folders an earlier "
        "--against wrote), e.g. again with another threshold"))
    calibrate: bool = field(default=False, metadata=setting(
        "measure the check itself: A/A false alarms, detection of injected slowdowns"))
    variants: str = field(default=DEFAULT_COMPARED, metadata=setting(
        f"runs to compare (default {DEFAULT_COMPARED})"))
    devices: int = field(default=1, metadata=setting())
    task: str = field(default="quick", metadata=setting())
    # 400 timed steps (~0.7 s) a run: with 80 (~0.14 s) one short hiccup of the machine moved a run's median, and
    # run-to-run noise was 14-16 % instead of ~4 %.
    run_args: str = field(default="--epochs 20 --windows 100", metadata=setting(
        "more `bench run` options for every run (default: longer timing on the quick task)"))
    repeats: int = field(default=5, metadata=setting(
        "duets: runs a side, each taking turns with one of the other side (default 5)"))
    groups: int = field(default=10, metadata=setting("A/A comparisons for --calibrate (default 10)"))
    threshold: float = field(default=0.05, metadata=setting("smallest change that counts (default 0.05)"))
    alpha: float = field(default=0.01, metadata=setting(
        "significance level (default 0.01: a false alarm costs a CI run and trust)"))
    accuracy_tolerance: float = field(default=0.01, metadata=setting("absolute accuracy drop allowed"))
    out: Path = field(default=Path("results/latest/regress"), metadata=setting())

    def check(self, command: str) -> None:
        if not (self.calibrate or self.against or (self.baseline and self.current)):
            raise SpecError("say what to compare: --against REV, or --baseline OLD.jsonl --current NEW.jsonl")


@dataclass(frozen=True)
class History(Settings):
    """bench history: the series CI kept, and what counts as a change point and as a regression."""
    source: Path = field(default=None, metadata=setting(
        "a folder of per-commit results folders (each a `bench regress --out` or a results folder), or "
        "github-action-benchmark's data.js", positional=True, type=Path))
    threshold: float = field(default=0.05, metadata=setting("smallest change that counts (default 0.05)"))
    accuracy_tolerance: float = field(default=0.01, metadata=setting("absolute accuracy drop allowed"))
    max_pvalue: float = field(default=MAX_PVALUE, metadata=setting(
        "a change point is kept where Welch's test between its segments gives p at most this (default 0.001, as "
        "Apache Otava)"))
    calibration: list[Path] | None = field(default=None, metadata=setting(
        "a `bench regress --calibrate` folder of a runner: its null duets give the smallest change an A/B sees "
        "there (repeatable, one a runner)", action="append", metavar="DIR"))
    duets: int = field(default=5, metadata=setting("duets an A/B runs, for its floor (default 5)"))
    alpha: float = field(default=0.01, metadata=setting("the A/B's significance level, for its floor"))
    out: Path = field(default=Path("results/latest/history"), metadata=setting(
        "history.html, its PNGs and history.json (default results/latest/history)"))

    def check(self, command: str) -> None:
        if not 0 < self.max_pvalue < 1:
            raise SpecError(f"--max-pvalue {self.max_pvalue}: give a probability between 0 and 1 (default 0.001)")


@dataclass(frozen=True)
class GpuCheck(Settings):
    """bench gpu-check: its time budget and which of its steps."""
    dry_run: bool = field(default=False, metadata=setting(
        "print every run it would make with its time estimate, and run nothing (on any machine)"))
    budget: float = field(default=DEFAULT_BUDGET_S, metadata=setting(
        f"the whole check's time (default {DEFAULT_BUDGET_S:.0f}): a step that would not fit in what is left is "
        "recorded as skipped", metavar="SECONDS"))
    only: str | None = field(default=None, metadata=setting(
        "only these groups or steps, comma-separated (approaches, energy, memory, peer, compile, audit, tensorflow, "
        "report): a second call for what was skipped; the folder keeps the other steps' outcomes", metavar="GROUPS"))
    out: Path | None = field(default=None, metadata=setting(
        "the folder (default results/gpu-check-<the GPU's name>)"))

    def check(self, command: str) -> None:
        if self.budget <= 0:
            raise SpecError(f"--budget {self.budget:g}: give the check's seconds, e.g. {DEFAULT_BUDGET_S:.0f}")
