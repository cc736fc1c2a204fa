"""What a rank reports back: `rank<R>.jsonl` in the run folder, one JSON line a record, written by the rank
(bench.worker.Worker.record) and read back by the harness (bench.run.fold, bench.metrics) into these same
dataclasses, one per event.

Standard library only, like bench.spec.rank_spec beside it: a rank imports nothing of the harness. Both sides name
a field by attribute, so a field renamed here is renamed on both, and one misspelt fails at construction or
attribute access. A line is `{"event": EVENT, "rank", "time", ...the fields}`, the names the ranks have always
written, so stored runs still fold; an optional field (default None) is left off while it is None, as the ranks
always left it off.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import ClassVar, TypeVar

Record = TypeVar("Record", bound="RankRecord")  # one kind of record, where a reader names it


class UnreadableRecord(ValueError):
    """A line that is no record this dtbench knows: an unknown event, or one without a field its type needs."""


@dataclass(frozen=True, kw_only=True)
class RankRecord:
    """One line of a rank's report. The worker stamps `rank` and `time` (epoch seconds) as it writes it."""
    EVENT: ClassVar[str]
    # The field that holds what the line says beyond the type's fields (flattened on the line), or None: the rest
    # of such a line is dropped (a field of another dtbench that nothing here reads).
    OPEN: ClassVar[str | None] = None
    rank: int = 0
    time: float = 0.0

    def to_line(self) -> dict:
        line: dict = {"event": self.EVENT}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == self.OPEN:
                line.update(value)
            elif value is not None or f.default is not None:
                line[f.name] = value
        return line

    @classmethod
    def from_line(cls: type[Record], line: dict) -> Record:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        given = {name: value for name, value in line.items() if name in fields and name != cls.OPEN}
        if cls.OPEN:
            given[cls.OPEN] = {name: value for name, value in line.items() if name not in fields and name != "event"}
        missing = [name for name, f in fields.items() if name not in given
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            raise UnreadableRecord(f"a {cls.EVENT!r} line without {', '.join(missing)}")
        return cls(**given)


@dataclass(frozen=True)
class Joined(RankRecord):
    """The world this process joined (the harness checks it against the plan), where it runs, and what its
    framework says of itself and its devices."""
    EVENT = "joined"
    OPEN = "info"
    world_size: int
    local_rank: int
    node_rank: int
    pid: int
    host: str
    cores: list[int]                   # the cores the rank is pinned to
    cuda_visible: str | None           # CUDA_VISIBLE_DEVICES as the rank saw it
    host_addr: str | None = None       # a multi-host run: this host's address on the collectives' interface
    interface: str | None = None
    malloc: dict | str = "glibc defaults"  # the MALLOC_* tunables it ran under
    # What the row keeps in its own columns (bench.run.fold); None where the framework does not say.
    framework_version: str | None = None
    device: str | None = None          # the device it chose from those it could see (bench.worker.gpus)
    device_name: str | None = None
    threads: int | None = None
    keras: str | None = None           # TensorFlow: the Keras that ran
    engine_handover: float | None = None  # an engine's run (--engine): when it handed this rank its function
    # The rest of the framework's report (backend, CUDA/NCCL, kernels, replicas...): the row's environment.
    info: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Loader(RankRecord):
    """Loader worker processes decode on the slot's cores beside the training's threads."""
    EVENT = "loader"
    workers: int
    cores: int
    trainer_threads: int


@dataclass(frozen=True)
class Windows(RankRecord):
    """Fewer timing windows fit in the steps trained than the task plans."""
    EVENT = "windows"
    planned: int
    timed: int
    steps: int


@dataclass(frozen=True)
class FirstStep(RankRecord):
    """The first training step has ended (its time ends start-up)."""
    EVENT = "first_step"


@dataclass(frozen=True)
class Loss(RankRecord):
    """Rank 0's training loss at one step of the loss curve."""
    EVENT = "loss"
    step: int
    samples: int
    train_s: float                     # the clock's training time so far, pauses excluded
    loss: float


@dataclass(frozen=True)
class Epoch(RankRecord):
    """An epoch's end: its evaluation, over every rank's share of the test set."""
    EVENT = "epoch"
    epoch: int                         # epochs done
    train_s: float
    samples: int | None = None         # samples trained so far (None without a loss curve)
    eval_s: float | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None
    eval_samples: int | None = None
    train_loss: float | None = None    # the epoch's mean training loss over all ranks


@dataclass(frozen=True)
class Checkpoint(RankRecord):
    """One checkpoint saved (every rank waits for it); after the last epoch, loaded back."""
    EVENT = "checkpoint"
    epoch: int
    save_s: float
    load_s: float | None
    bytes: int


@dataclass(frozen=True)
class Restored(RankRecord):
    """A resumed run loaded the checkpoint of the run it continues."""
    EVENT = "restored"
    load_s: float
    epochs_done: int
    directory: str


@dataclass(frozen=True)
class SavedModel(RankRecord):
    """--mlflow: rank 0's save of the trained model: what it wrote, or why it could not."""
    EVENT = "model"
    flavor: str | None = None
    save_s: float | None = None
    bytes: int | None = None
    error: str | None = None


@dataclass(frozen=True)
class Result(RankRecord):
    """A rank's measurement, once training is done: the clock's windows (bench.worker.clock.StepClock.summary),
    the last evaluation, memory, the model's size and FLOPs, the fast-path settings it trained with."""
    EVENT = "result"
    window_seconds: list[float]
    window_steps: int
    samples_per_window: int
    train_s: float
    peak_memory_mb: float
    steps: int | None = None
    first_step_s: float | None = None
    input_wait_s: float | None = None  # None where the loop fetches batches inside the step (TensorFlow)
    window_cpu_seconds: list[float] | None = None  # the process's CPU time in each window (None: an older dtbench)
    profiled_window_seconds: list[float] | None = None  # --profile: the profiled windows, as the clock timed them
    own_window_seconds: list[float] | None = None  # the rank's own time in each window, where it is timed
    resident_window_seconds: list[float] | None = None  # --input-phases: each timed window's resident partner
    # --input-phases on several ranks: each resident window's batches first trained with the sync off (None: none)
    unsynced_window_seconds: list[float | None] | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None
    eval_samples: int | None = None
    train_loss: float | None = None
    epochs: int | None = None          # epochs evaluated (0 without an evaluation)
    time_to_accuracy_s: float | None = None
    params: int | None = None
    flops_per_sample: float | None = None  # rank 0 counts them
    fast_path: dict = field(default_factory=dict)
    memory: dict | None = None         # model_state_bytes, the device peaks (bench.metrics.memory.per_rank)
    profile: dict | None = None        # --profile: rank 0's summary of its trace (bench.worker.profile)


@dataclass(frozen=True)
class Error(RankRecord):
    """The exception that ended the process, with the end of its traceback."""
    EVENT = "error"
    error: str
    traceback: str = ""


@dataclass(frozen=True)
class Peak(RankRecord):
    """probes.peak: the matmul peak of one device slot, a result per precision."""
    EVENT = "peak"
    device_type: str
    device_name: str
    threads: int
    results: list[dict]


@dataclass(frozen=True)
class Collectives(RankRecord):
    """probes.collectives: each collective's time at each size."""
    EVENT = "collectives"
    backend: str
    results: list[dict]


RECORD_TYPES: tuple[type[RankRecord], ...] = (Joined, Loader, Windows, FirstStep, Loss, Epoch, Checkpoint, Restored,
                                              SavedModel, Result, Error, Peak, Collectives)
BY_EVENT: dict[str, type[RankRecord]] = {t.EVENT: t for t in RECORD_TYPES}


def parse(line: dict) -> RankRecord:
    """A line of a rank's report as its record (UnreadableRecord where it is none)."""
    kind = BY_EVENT.get(line.get("event"))
    if kind is None:
        raise UnreadableRecord(f"an unknown event {line.get('event')!r}")
    return kind.from_line(line)
