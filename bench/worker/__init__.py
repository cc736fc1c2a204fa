"""The small API every variant calls inside its processes. Standard library only.

A worker loads the run spec the harness wrote, pins itself to its slot, times
training with a `StepClock`, and reports typed records (bench.spec.rank_record)
as JSON lines to `rank<R>.jsonl` in the run directory; the harness reads them
back into the same dataclasses and folds them into one result row. The training
loop itself is the variant's own, written out in its framework's package:

    clock = worker.clock(global_batch, sync, steps=epochs * steps_per_epoch)
    clock.start()
    for epoch in range(epochs):
        for batch in clock.timed(loader):   # step_done() after each step
            ...one step...
        evaluation = worker.end_epoch(clock, epoch, epochs, evaluate, checkpoint)  # the clock paused meanwhile
        if clock.stop:                       # an independent run ends once its windows are timed
            break
    return worker.finish(clock, evaluation, epoch + 1, peak_memory_mb, params)

A run with checkpoints hands `end_epoch` its framework's `Checkpoint` (save, load); a resumed run starts
at `worker.restore(checkpoint)`, the epoch after the last one saved. With --mlflow (`logs_model`) rank 0
hands `save_model` its framework's MLflow save once training is done.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import os
import resource
import socket
import sys
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Protocol

from bench.spec import rank_record as records  # by module: its Checkpoint record is not this Checkpoint
from bench.spec.rank_spec import RankSpec
from bench.spec.task import TaskSpec
from bench.worker import faults, manifest, stacks
from bench.worker.clock import OwnTimer, Profiler, StepClock, Undo
from bench.worker.faults import FAULT_ENV  # noqa: F401  (the harness names it)
from bench.worker.profile import PROFILE_DIR, PROFILED_WINDOWS
from bench.worker.gpus import CUDA_DEVICE_ENV, cuda_index, visible_gpus
from bench.worker.turns import Turns

SPEC_ENV = "DTBENCH_SPEC"
NODE_RANK_ENV = "DTBENCH_NODE_RANK"
# An engine's run: when the engine handed this rank its function (epoch seconds, bench.engines.api.rank_main).
HANDOVER_ENV = "DTBENCH_ENGINE_HANDOVER"
LAUNCH_TIME_ENV = "DTBENCH_LAUNCH_TIME"
HOST_ADDR_ENV = "DTBENCH_HOST_ADDR"  # a multi-host run: this host's address on the collectives' interface


CHECKPOINT_DIR = "checkpoint"
MODEL_DIR = "model"  # --mlflow: the trained model as an MLflow model, which the harness logs as the run's artifact
MIN_WINDOWS = 3  # the fewest timing windows a row may rest on (a median and a spread)


class Checkpoint(Protocol):
    """Model + optimizer (+ scaler, RNG) state saved the approach's own way; every rank calls both."""

    def save(self, directory: Path, epochs_done: int) -> None: ...

    def load(self, directory: Path) -> int:
        """Restore the state saved in `directory`; return how many epochs it had trained."""
        ...


class LossCurve:
    """Rank 0's training loss every `every` steps. The losses stay as the framework returned them (on the
    device) and are read at the epoch's end, the clock paused: no device sync inside a timing window."""

    def __init__(self, worker: "Worker", every: int, steps_done: int):
        self.worker, self.every, self.step = worker, every, steps_done
        self.pending: list[tuple[int, float, object]] = []

    def add(self, loss, clock: StepClock) -> None:
        self.step += 1
        if self.worker.rank == 0 and self.step % self.every == 0:
            self.pending.append((self.step, clock.train_seconds(), loss))

    def flush(self) -> None:
        samples_per_step = self.worker.task.recipe.global_batch
        for step, seconds, loss in self.pending:
            self.worker.record(records.Loss(step=step, samples=step * samples_per_step, train_s=seconds,
                                            loss=float(loss)))
        self.pending = []


class Worker:
    """One process of a run: its identity, its slot and its report file."""

    def __init__(self, spec_path: str | os.PathLike | None = None):
        path = Path(spec_path or os.environ[SPEC_ENV])
        self.spec = RankSpec.load(path)
        self.task: TaskSpec = self.spec.task
        self.run_dir = Path(self.spec.run_dir)
        env = os.environ
        # Set by the launcher (torchrun, accelerate launch, or the harness for TF workers); 0 alone.
        self.rank = int(env.get("RANK", 0))
        self.local_rank = int(env.get("LOCAL_RANK", 0))
        self.node_rank = int(env.get(NODE_RANK_ENV, env.get("GROUP_RANK", 0)))
        self._report = open(self.run_dir / f"rank{self.rank}.jsonl", "a", buffering=1)
        stacks.write_on_signal(self.run_dir, f"rank{self.rank}")
        if self.task.options.device_memory_gib and self.device_type == "cpu":  # an allocation past it fails (ENOMEM)
            limit = int(self.task.options.device_memory_gib * 2**30)
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
        self._time_to_accuracy: float | None = None
        self._loss_curve: LossCurve | None = None

    @property
    def device_type(self) -> str:
        return self.spec.device_type

    @property
    def profile_windows(self) -> int:
        """--profile: the windows after the warm-up that run under the framework's profiler (0: none)."""
        return PROFILED_WINDOWS if self.spec.profile else 0

    @property
    def profile_dir(self) -> Path:
        return self.run_dir / PROFILE_DIR

    @property
    def timed_steps(self) -> int:
        """Warm-up, the profiled windows and every timing window: the fewest steps a run must train."""
        timing = self.task.timing
        return timing.warmup_steps + timing.window_steps * (self.profile_windows + timing.windows)

    @property
    def synthetic(self) -> bool:
        """Batches made on the device (a synthetic dataset, or a real one's synthetic twin): no evaluation."""
        return self.task.synthetic

    @property
    def independent(self) -> bool:
        """Gradient synchronisation off: only the timed windows matter, replicas diverge, no evaluation."""
        return self.spec.independent

    @property
    def approach(self) -> dict:
        """The settings the variants table gives this approach's module (Variant.approach)."""
        return self.spec.approach

    def cuda_device(self, device_count: int) -> int:
        """The GPU index this rank trains on: the one its engine chose, or the one its launcher's
        visibility gives it (`bench.worker.gpus.cuda_index`)."""
        if os.environ.get(CUDA_DEVICE_ENV):
            return int(os.environ[CUDA_DEVICE_ENV])
        return cuda_index(visible_gpus(os.environ.get("CUDA_VISIBLE_DEVICES"), device_count), self.local_rank)

    def pin(self, loader_processes: bool = True) -> int:
        """Pin this process to its slot's cores; return how many threads it should use: the slot's cores,
        less one per loader worker process (file input: DataLoader workers decode on the same cores; never
        fewer than one). `loader_processes=False`: the loader decodes on threads of the framework's own
        (tf.data) beside the compute pool, which keeps its size (and so the compute's float order)."""
        # On a real multi-host run the spec holds only this host's node.
        slots = self.spec.plan_of(self.node_rank).cpu_slots
        cores = slots[self.local_rank % len(slots)]
        os.sched_setaffinity(0, cores)
        workers = self.loader_workers
        threads = max(1, len(cores) - workers) if loader_processes else len(cores)
        if workers:
            self.record(records.Loader(workers=workers, cores=len(cores), trainer_threads=threads))
        return threads

    @property
    def loader_workers(self) -> int:
        return self.task.data.loader_workers


    def record(self, record: records.RankRecord) -> None:
        """Write one record to this rank's report, stamped with the rank and the time."""
        stamped = dataclasses.replace(record, rank=self.rank, time=time.time())
        self._report.write(json.dumps(stamped.to_line()) + "\n")

    def joined(self, world_size: int, framework_version: str | None = None, device: str | None = None,
               device_name: str | None = None, threads: int | None = None, keras: str | None = None,
               **info) -> None:
        """Report the world this process actually joined; the harness checks it against the plan. `info`: the rest
        of what the framework says of itself and its devices (backend, CUDA/NCCL, kernels...)."""
        self.record(records.Joined(
            world_size=world_size, local_rank=self.local_rank, node_rank=self.node_rank, pid=os.getpid(),
            host=socket.gethostname(), cores=sorted(os.sched_getaffinity(0)),
            cuda_visible=os.environ.get("CUDA_VISIBLE_DEVICES"), host_addr=os.environ.get(HOST_ADDR_ENV) or None,
            interface=os.environ.get("GLOO_SOCKET_IFNAME") if os.environ.get(HOST_ADDR_ENV) else None,
            malloc={k: v for k, v in os.environ.items() if k.startswith("MALLOC_")} or "glibc defaults",
            framework_version=framework_version, device=device, device_name=device_name, threads=threads,
            keras=keras, engine_handover=float(os.environ[HANDOVER_ENV]) if os.environ.get(HANDOVER_ENV) else None,
            info=info))

    @property
    def input_phases(self) -> bool:
        """Each timed window followed by one on resident batches (bench.worker.clock.StepClock): asked by the task,
        on a real input (a synthetic one has no pipeline), synchronised (an independent run evaluates nothing to
        keep) and alone on the machine (a duet's turns are its own alternation)."""
        return (self.task.timing.input_phases and not self.synthetic and not self.independent
                and not Turns.from_environment(self.rank).in_duet)

    def clock(self, samples_per_step: int, sync: Callable[[], None], steps: int | None,
              on_warmup_done: Callable[[], None] = lambda: None, profiler: Profiler | None = None,
              own_timer: OwnTimer | None = None, resident: Callable | None = None,
              unsynced: Undo | None = None) -> StepClock:
        """The run's clock, for a loop that trains `steps` steps in all. Fewer steps than the windows need
        (weak scaling on many devices: a bigger batch, fewer steps an epoch) time the windows that fit,
        recorded; fewer than MIN_WINDOWS is refused. With --profile, `profiler` runs over the profiled
        windows (`profile_windows`). `resident(batch)`: the batch made resident on the device, the loop's way,
        for the input phases where the task asks for them (`input_phases`); each timed window then takes two, and
        with `unsynced` (an approach that can train a window with its gradient synchronisation off and undo it)
        three. `steps=None`: a loop of its own (`@dtbench.distributed`) that says nothing of its length ahead: the
        task's windows are planned, and the row says how many it timed."""
        t = self.task.timing
        if steps is None:
            steps = t.warmup_steps + t.window_steps * t.windows
        profiled = self.profile_windows if profiler is not None else 0
        phases = resident is not None and self.input_phases
        windows = min(t.windows, ((steps - t.warmup_steps) // t.window_steps - profiled) // (2 if phases else 1))
        if windows < min(MIN_WINDOWS, t.windows):
            needed = profiled + MIN_WINDOWS * (2 if phases else 1)
            raise ValueError(f"the task trains {steps} steps but warm-up and {needed} windows need "
                             f"{t.warmup_steps + needed * t.window_steps}: raise --epochs or "
                             "lower --window-steps" + (" (the input phases time two windows a pair)" if phases else ""))
        if windows < t.windows:
            self.record(records.Windows(planned=t.windows, timed=windows, steps=steps))
        self._clock = StepClock(t.warmup_steps, t.window_steps, windows, samples_per_step, sync,
                                on_first_step=lambda: self.record(records.FirstStep()),
                                on_step=lambda step: faults.inject(self.rank, step, self._clock),
                                turns=Turns.from_environment(self.rank), stop_when_done=self.independent,
                                on_warmup_done=on_warmup_done, profiler=profiler, profile_windows=profiled,
                                own_timer=own_timer, resident=resident if phases else None,
                                unsynced=unsynced if phases else None)
        return self._clock

    def loss_curve(self, steps_done: int = 0) -> LossCurve:
        """The loop's loss log (`add(loss, clock)` after every step); a resumed run counts on from its steps."""
        self._loss_curve = LossCurve(self, self.task.timing.loss_every_steps, steps_done)
        return self._loss_curve

    @property
    def checkpoint_dir(self) -> Path:
        return self.run_dir / CHECKPOINT_DIR

    def restore(self, checkpoint: Checkpoint) -> int:
        """A resumed run (`--resume-from`): load the last checkpoint of the run it continues, timed;
        return the epoch to start at (0 for a fresh run)."""
        directory = self.spec.resume_from
        if not directory:
            return 0
        started = time.perf_counter()
        epochs_done = checkpoint.load(Path(directory))
        self.record(records.Restored(load_s=time.perf_counter() - started, epochs_done=epochs_done,
                                     directory=directory))
        return epochs_done

    @property
    def logs_model(self) -> bool:
        """--mlflow: the trained model is saved for the harness to log. Not in independent runs: their replicas
        diverged, there is no one trained model."""
        return self.spec.log_model and not self.independent

    def save_model(self, save: Callable[[Path], str]) -> None:
        """Rank 0, after training: `save(directory)` writes the trained model with its MLflow flavour's
        `save_model` and returns the flavour's name; timed and measured. A model that cannot be saved is
        recorded with the reason and costs the run nothing: its figures stand without it."""
        os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # the import would send telemetry otherwise
        directory, started = self.run_dir / MODEL_DIR, time.perf_counter()
        try:
            flavor = save(directory)
        except Exception as exc:  # noqa: BLE001 - the measurement stands; the row says why there is no model
            self.record(records.SavedModel(error=f"{type(exc).__name__}: {exc}"[:2000]))
            return
        save_s = time.perf_counter() - started
        self.record(records.SavedModel(flavor=flavor, save_s=save_s, bytes=bytes_on_disk(directory)))

    def _checkpoint(self, checkpoint: Checkpoint, epochs_done: int, last: bool) -> None:
        """Save (the training stall, timed across the barrier every approach ends its save with); after the
        last epoch load it back, timed, so that the final evaluation runs on the state read from disk."""
        if self.rank == 0:  # a save killed halfway leaves no manifest that vouches for it
            (self.checkpoint_dir / manifest.NAME).unlink(missing_ok=True)
        started = time.perf_counter()
        checkpoint.save(self.checkpoint_dir, epochs_done)
        save_s = time.perf_counter() - started
        if self.rank == 0:  # after the barrier every approach ends its save with: the save is whole
            manifest.write(self.checkpoint_dir, epochs_done)
        load_s = None
        if last:
            started = time.perf_counter()
            checkpoint.load(self.checkpoint_dir)
            load_s = time.perf_counter() - started
        self.record(records.Checkpoint(epoch=epochs_done, save_s=save_s, load_s=load_s,
                                       bytes=bytes_on_disk(self.checkpoint_dir)))

    def end_epoch(self, clock: StepClock, epoch: int, epochs: int, evaluate: Callable[[], dict] | None,
                  checkpoint: Checkpoint | None = None) -> dict | None:
        """Pause the clock, save a checkpoint (when the task asks), evaluate exactly (not in independent
        runs: their replicas diverged), record the epoch and when the target accuracy was first reached,
        resume for the next epoch."""
        clock.pause()
        if self._loss_curve is not None:
            self._loss_curve.flush()
        if clock.stop:
            return None
        if checkpoint is not None and self.task.options.checkpoint_every_epoch:
            self._checkpoint(checkpoint, epoch + 1, last=epoch + 1 == epochs)
        evaluation = None
        if evaluate is not None and not self.independent:
            started = time.perf_counter()
            evaluation = evaluate()
            eval_s = time.perf_counter() - started
            target = self.task.timing.target_accuracy
            if self._time_to_accuracy is None and target and evaluation["test_accuracy"] >= target:
                self._time_to_accuracy = clock.train_seconds()
            seen = self._loss_curve.step * self.task.recipe.global_batch if self._loss_curve else None
            self.record(records.Epoch(epoch=epoch + 1, train_s=clock.train_seconds(), samples=seen, eval_s=eval_s,
                                      **evaluation))
        if epoch + 1 < epochs:
            clock.resume()
        return evaluation

    def finish(self, clock: StepClock, evaluation: dict | None, epochs: int, peak_memory_mb: float,
               params: int, flops_per_sample: float | None = None, fast_path: dict | None = None,
               **measured) -> records.Result:
        """The result: the clock's windows, the last evaluation, memory, the model's FLOPs per sample
        and the fast-path settings the run trained with; `measured` overrides the clock's figures
        (e.g. input_wait_s=None where the wait cannot be timed) and adds memory and profile; recorded
        for the harness."""
        result = records.Result(**{
            **clock.summary(), **(evaluation or {}), "epochs": epochs if evaluation else 0,
            "train_s": clock.train_seconds(), "time_to_accuracy_s": self._time_to_accuracy,
            "peak_memory_mb": peak_memory_mb, "params": params, "flops_per_sample": flops_per_sample,
            "fast_path": fast_path or {}, **measured})
        self.record(result)
        return result

    @contextmanager
    def session(self):
        """Record any exception with its traceback before the process dies."""
        try:
            yield self
        except BaseException as exc:  # noqa: BLE001 - report everything, then re-raise
            self.record(records.Error(error=f"{type(exc).__name__}: {exc}",
                                      traceback="".join(traceback.format_exception(exc))[-4000:]))
            raise
        finally:
            self._report.close()


def bytes_on_disk(directory: Path) -> int:
    """The size of the files under `directory` (a checkpoint, a saved model)."""
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file())


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's marketing name, with its microarchitecture and x86 family and model where /proc/cpuinfo has them:
    a cloud VM's name ("AMD EPYC") is the same on every generation, whose speeds differ by more than the
    effects compared (family 23 model 49 is a Zen 2, 25/17 a Zen 4)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text() if cpuinfo is None else cpuinfo
    except OSError:
        cpuinfo = ""
    first = dict(line.split(":", 1) for line in cpuinfo.split("\n\n")[0].splitlines() if ":" in line)
    first = {key.strip(): value.strip() for key, value in first.items()}
    if not (name := first.get("model name")):
        import platform

        return platform.machine()
    known = [part for part in (microarchitecture(),) if part]
    if "cpu family" in first and "model" in first:
        known.append(f"family {first['cpu family']} model {first['model']}")
    return ", ".join([name, *known])


@functools.cache
def microarchitecture() -> str | None:
    """This CPU's microarchitecture as archspec (Spack's) names it from its vendor, family and flags ("zen2",
    "sapphirerapids"); None without archspec (a lent GPU machine's Python) or where it knows only the ISA."""
    try:
        import archspec.cpu
    except ImportError:
        return None
    name = archspec.cpu.host().name
    return None if name.startswith(("x86_64", "aarch64", "ppc64", "riscv64")) else name


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def spec_path_from_argv(argv: list[str] | None = None) -> str:
    """The spec path from `--spec PATH` (re-runnable by hand) or the environment."""
    argv = sys.argv[1:] if argv is None else argv
    if "--spec" in argv:
        return argv[argv.index("--spec") + 1]
    return os.environ[SPEC_ENV]


def exit_now(code: int = 0) -> None:
    """Leave without running C++ static destructors.

    torch 2.14's gloo aborts at interpreter exit ("terminate called without an
    active exception") in about one run in three here, after all work is done;
    the process would be counted as failed. Everything is flushed first.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
