"""The result row: one run's figures and where they came from (one JSON line in the store)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from bench.results.key import RunKey, config_key

# The row's layout. A row without one was written before rows were versioned (version 1: the same fields as 2).
# A change of a field's name or meaning bumps it and adds the step from the version before to MIGRATIONS.
SCHEMA_VERSION = 4
# Figures derived from other rows or from the measured peak, which rows up to version 2 stored as they stood when
# the row was written; a report derives them from the whole folder (bench.metrics).
DERIVED = ("scaling_efficiency", "scaling_efficiency_vs_single", "achieved_tflops", "mfu", "peak_fraction")
# Derived from the row's own fields (its precision and TF32 switch; a compiled run's first step), which rows up to
# version 3 stored too; the metrics derive them (bench.metrics.utilisation, timing).
DERIVED_FROM_THE_ROW = ("matmul_precision", "compile_s")
MIGRATIONS = {1: lambda data: data,
              2: lambda data: {k: v for k, v in data.items() if k not in DERIVED},
              3: lambda data: {k: v for k, v in data.items() if k not in DERIVED_FROM_THE_ROW}}  # version n -> n + 1


@dataclass
class ResultRow:
    run_id: str
    started_at: str
    status: str                             # a bench.status.Status value
    variant: str
    framework: str
    launcher: str
    device_type: str
    nodes: int
    devices_per_node: int
    world_size: int
    task: dict
    error: str | None = None
    framework_version: str | None = None
    engine: str = "local"
    engine_address: str | None = None       # --ray-address, --spark-master, --dask-scheduler: an existing cluster
    device_name: str | None = None
    threads: int | None = None
    cores_per_slot: int | None = None       # on a CPU: the cores of one device slot
    oversubscribed: bool = False
    command: str | None = None
    warmup_steps: int | None = None
    window_steps: int | None = None
    windows: int | None = None
    throughput: dict | None = None          # median, ci_low, ci_high, ci_coverage, windows (samples/s)
    per_device_throughput: float | None = None
    # Input phases (--input-phases): real over resident-batch throughput, paired window by window (stats.paired_ratio)
    input_phases: dict | None = None
    step_time_ms: dict | None = None        # median, p90
    startup_s: float | None = None
    engine_startup_s: float | None = None   # --engine: launch to the engine handing the last rank its function
    train_s: float | None = None
    wall_s: float | None = None
    # Where the wall time went (seconds): start-up (launch to the first step's end), training (the clock's), evaluation,
    # checkpoints, the rest of the rank's life (model build, FLOP counting, saving the model) and teardown (the
    # last rank's result to the harness holding the row): wall_s is their sum (bench.run.fold.wall_split).
    wall_split: dict | None = None
    epochs: int | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None
    eval_samples: int | None = None
    time_to_accuracy_s: float | None = None
    peak_memory_mb: float | None = None
    timeseries: dict | None = None          # what the run did over time: the sampler's summary (bench.run.sampler)
    independent: bool = False                           # gradient synchronisation off: the no-communication bound
    # Workers update the shared weights without waiting for each other (tf-ps): not synchronous data
    # parallelism; an epoch is as many samples as the training set, not each sample once.
    asynchronous: bool = False
    # How close to the hardware: FLOPs counted per training sample (multiply-add = 2); a report derives the
    # matmuls' precision (task.precision, fast_path.tf32), the achieved FLOP/s, MFU and the fraction of the measured
    # peak from them.
    flops_per_sample: float | None = None
    fast_path: dict = field(default_factory=dict)       # channels_last, cudnn_benchmark, tf32, pin_memory, compile,
                                                        # persistent_workers, loader_start (how loader workers start)
    as_shipped: bool = False   # --as-shipped: every framework on its defaults (environment["kernels"] says what ran)
    keras: str | None = None   # TensorFlow: the Keras that ran ("keras 3.15.1"; "tf-keras 2.21.0" for tf-multiworker-fit)
    first_step_s: float | None = None                   # start to the end of step 1 (compilation, allocation; with
                                                        # --compile the compile time, out of every window)
    input_wait_fraction: float | None = None            # of the windows' time, waiting for the next batch
    host_cpu_ms_per_sample: float | None = None         # the ranks' processes' CPU time in the windows a sample
    # Each rank's own time per step, the part no collective waits in (its wait for batches and its forward: window
    # times are equal across ranks by construction), median over windows: {"own_ms": {rank: ms}, "slowest_rank",
    # "behind_median" (the slowest over the median rank, less 1), "spread" ((max - min) / median)}. None where
    # no rank times it (TensorFlow's step is one graph; a forward that all-gathers waits for the others).
    rank_times: dict | None = None
    # --profile: where the profiled windows' step went (bench.worker.profile.summary: ms per step by category,
    # communication in flight and its overlap, the top operations, the trace's file in the run folder's
    # profile/), the profiled step against the timed windows' (profiling's own cost), rank 0's.
    profile: dict | None = None
    # --checkpoint-every-epoch: the training stall of one save (median over the epochs), loading the last
    # one back, its bytes on disk; --resume-from: the run continued and the epochs it had trained.
    checkpoint_save_s: float | None = None
    checkpoint_load_s: float | None = None
    checkpoint_bytes: int | None = None
    resumed_from: str | None = None
    resumed_after_epochs: int | None = None
    resume_load_s: float | None = None
    # --mlflow: the trained model rank 0 saved as an MLflow model (its flavour's save_model) into the run folder's
    # model/, logged as the MLflow run's model artifact: the folder's bytes on disk and the time to save it.
    model_bytes: int | None = None
    model_save_s: float | None = None
    # The loss curve: rank 0's training loss every few steps ([step, samples, train_s, loss]) and per epoch
    # the training loss (mean over all ranks) and the test loss and accuracy
    # ([epoch, samples, train_s, train_loss, test_loss, test_accuracy]); train_s excludes pauses.
    curves: dict = field(default_factory=dict)
    # Memory per rank: {"model_state_bytes": {rank: {"parameters", "gradients", "optimizer"}}} (bytes resident,
    # each storage once; TensorFlow's gradients None: not resident; DeepSpeed adds "master_weights", ZeRO's fp32
    # copy of the rank's partition), and on CUDA the largest peak allocated and reserved (MiB) after warm-up.
    memory: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # Your own function (@dtbench.distributed): its module, name, source file and the SHA-256 of its source.
    function: dict | None = None
    git_sha: str | None = None
    host: str | None = None
    environment: dict = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    # Fields this version does not know (a newer dtbench's): kept, and written back as they came.
    unknown: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        # The plain string (asdict keeps a Status member): a row in memory is then the row read back.
        data["status"] = str(self.status)
        return {**data.pop("unknown"), **data}

    @property
    def key(self) -> RunKey:
        return config_key(vars(self))

    @classmethod
    def from_dict(cls, data: dict) -> "ResultRow":
        data = migrate(data)
        unknown = unknown_fields(data)
        return cls(**{k: v for k, v in data.items() if k not in unknown}, unknown={k: data[k] for k in unknown})


def unknown_fields(data: dict) -> set[str]:
    """The fields of a stored row this version does not know (its own `unknown` is never a stored field)."""
    return set(data) - ({f.name for f in dataclasses.fields(ResultRow)} - {"unknown"})


# What every row carries, and its type: a line without them is no row of dtbench's (a hand edit, another tool's).
REQUIRED = {"run_id": str, "status": str, "variant": str, "device_type": str, "nodes": int, "devices_per_node": int,
            "task": dict}


def malformed(data: dict) -> str | None:
    """Why a stored line is not a row (a field missing or of the wrong type, a task without its name), or None."""
    for name, kind in REQUIRED.items():
        if not isinstance(data.get(name), kind) or (kind is int and isinstance(data[name], bool)):
            return f"no {name}" if name not in data else f"{name} is not {kind.__name__}"
    if not isinstance(data["task"].get("name"), str):
        return "its task has no name"
    if not isinstance(data.get("schema_version", 1), int):
        return "schema_version is not int"
    return None


def migrate(data: dict) -> dict:
    """A stored row brought to SCHEMA_VERSION (a row of a newer version is left as it is)."""
    version = data.get("schema_version", 1)
    while version < SCHEMA_VERSION:
        data, version = {**MIGRATIONS[version](data), "schema_version": version + 1}, version + 1
    return data
