"""Your own function as one rank of a run (`@dtbench.distributed`): the process group is up (bench.engines.api),
this module pins the rank, reports the world it joined, and runs the function with the run's clock behind
`dtbench.step` and an exact evaluation behind `dtbench.evaluate`. Only the loop is the user's: warm-up, windows,
the barrier at each window's bounds and the rank's result are the same as torch_impl/train.py's.
"""
from __future__ import annotations

from pathlib import Path

import cloudpickle
import torch
import torch.distributed as dist

from bench.spec import rank_record as records
from bench.worker import Worker, peak_rss_mb
from torch_impl import memory
from torch_impl.train import join_process_group, set_threads

_session: "Session | None" = None


class NeverStepped(RuntimeError):
    """The function returned without marking a step: there is nothing to time."""


class Session:
    """What `dtbench.step` and `dtbench.evaluate` reach inside a rank."""

    def __init__(self, worker: Worker, device: torch.device, world_size: int):
        self.worker, self.device, self.world_size = worker, device, world_size
        self.clock = worker.clock(0, self.sync, steps=None,
                                  on_warmup_done=lambda: memory.reset_peak(device))
        self.evaluation: dict | None = None

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        dist.barrier()

    def step(self, samples: int) -> None:
        if self.clock.steps == 0:  # every rank trains the same batch size a step (data parallelism's premise)
            self.clock.samples_per_step = int(samples) * self.world_size
        self.clock.step_done()

    def evaluate(self, correct: int, total: int) -> float:
        """Every rank's count summed: the accuracy over the whole set, each sample once."""
        self.clock.pause()
        totals = torch.tensor([float(correct), float(total)], dtype=torch.float64)
        dist.all_reduce(totals)
        right, seen = totals.tolist()
        self.evaluation = {"test_accuracy": right / seen if seen else None, "eval_samples": int(seen)}
        self.clock.resume()
        return self.evaluation["test_accuracy"]


def current() -> Session:
    if _session is None:
        raise RuntimeError("dtbench.step and dtbench.evaluate work inside a function decorated with "
                           "@dtbench.distributed: decorate the training function and call it")
    return _session


def rank(spec_path: str):
    """One rank: the user's function under the run's clock; its value returned to the engine."""
    global _session
    worker = Worker(spec_path)
    with worker.session():
        fn, args, kwargs = cloudpickle.loads(Path(worker.approach["payload"]).read_bytes())
        if worker.device_type == "cpu":
            set_threads(worker.pin())
        _, world_size, device = join_process_group(worker)
        _session = session = Session(worker, device, world_size)
        session.clock.start()
        try:
            value = fn(*args, **kwargs)
        finally:
            _session = None
        clock = session.clock
        if clock.steps == 0:
            raise NeverStepped(f"{worker.spec.variant} returned without calling dtbench.step(samples): call it "
                               "once after each training step, so that the steps can be timed")
        clock.pause()
        if len(clock.window_seconds) < clock.windows:  # the row says how many of the planned windows it rests on
            worker.record(records.Windows(planned=clock.windows, timed=len(clock.window_seconds), steps=clock.steps))
        # Before the result: once every rank's is recorded the harness may stop what is still exiting.
        Path(worker.run_dir, f"value{worker.rank}.pkl").write_bytes(cloudpickle.dumps(value))
        peaks = memory.device_peaks(device)
        worker.finish(clock, session.evaluation, 1 if session.evaluation else 0,
                      peaks["peak_allocated_mb"] if peaks else peak_rss_mb(), params=None,
                      fast_path={}, memory=peaks or None)
    return value
