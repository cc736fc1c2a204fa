"""Your own training function, measured: the decorator the launchers' own APIs have, with dtbench's clock.

    import dtbench

    @dtbench.distributed(devices=2, engine="dask")     # or torchrun, spark, ray
    def train(epochs):
        ...                                            # torch.distributed is up: wrap the model in DDP
        for batch in loader:
            ...one step...
            dtbench.step(len(batch))                   # this rank's samples
        dtbench.evaluate(correct, total)               # optional: summed over every rank
        return model.state_dict()

    state = train(3)   # rank 0's value; a row in OUT/results.jsonl

Each call is one run of dtbench's (bench.sweep.function): the function is shipped by value to its engine's
ranks, timed on the built-in loops' clock (warm-up left out, every device synchronised at each window's bounds),
and folded into a row beside theirs. A failed, hung or step-less function gets its row too and raises
`FunctionFailed`.
"""
from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Any, Callable

__all__ = ["FunctionFailed", "distributed", "evaluate", "run", "step"]


class FunctionFailed(RuntimeError):
    """The run ended without a measurement: it raised, hung past its timeout, or never called `dtbench.step`.
    Its row is in the store all the same; `row` is it."""

    def __init__(self, message: str, row=None):
        super().__init__(message)
        self.row = row


def step(samples: int) -> None:
    """One training step done on this rank, of `samples` samples (the same on every rank). Call it on every rank
    after every step: the clock synchronises the devices at its windows' bounds."""
    from torch_impl import function

    function.current().step(samples)


def evaluate(correct: int, total: int) -> float:
    """This rank's share of an evaluation: the accuracy over every rank's samples (each counted once), which
    the row records; returned on every rank. The clock is paused meanwhile."""
    from torch_impl import function

    return function.current().evaluate(correct, total)


def distributed(fn: Callable | None = None, *, devices: int = 2, engine: str = "torchrun", nodes: int = 1,
                out: str | os.PathLike | None = None, timeout: float = 600.0, all_ranks: bool = False,
                device_type: str | None = None, mlflow: str | None = None, address: str | None = None,
                warmup_steps: int | None = None, window_steps: int | None = None, windows: int | None = None):
    """`fn` run on `devices` ranks through `engine` each time it is called, measured into a row of `out`
    (default results/latest). Returns rank 0's value, or every rank's with `all_ranks`. `timeout` (seconds) cuts a
    hung run; `mlflow` logs the row as the other rows are logged (its link printed); `address` runs on the
    engine's existing cluster (a Ray address, a Spark master URL, a Dask scheduler) in place of a local one; the
    clock's warm-up, window length and windows are the default task's unless given."""
    def decorate(function: Callable) -> Callable:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any):
            return run(function, args, kwargs, devices=devices, engine=engine, nodes=nodes, out=out,
                       timeout=timeout, all_ranks=all_ranks, device_type=device_type, mlflow=mlflow, address=address,
                       warmup_steps=warmup_steps, window_steps=window_steps, windows=windows)
        return call

    return decorate(fn) if fn is not None else decorate


def run(fn: Callable, args: tuple = (), kwargs: dict | None = None, *, devices: int = 2, engine: str = "torchrun",
        nodes: int = 1, out: str | os.PathLike | None = None, timeout: float = 600.0, all_ranks: bool = False,
        device_type: str | None = None, mlflow: str | None = None, address: str | None = None, **timing):
    """One measured call of `fn(*args, **kwargs)` (what the decorator does)."""
    from bench.request.settings import DEFAULT_OUT
    from bench.spec import devices as machines
    from bench.status import Status
    from bench.sweep import function, runner

    folder = Path(out or DEFAULT_OUT).resolve()
    machine = machines.discover()
    [spec] = function.specs(fn, args, kwargs or {}, folder, [engine], [devices], nodes,
                            device_type or machine.default_device_type, timeout,
                            addresses={engine: address}, **timing)
    [row] = runner.run_all([spec], folder, machine, mlflow)
    print(summary(row, folder), file=sys.stderr)
    if mlflow:
        from bench.sweep import tracking

        print(f"dtbench: MLflow run {tracking.link_of(mlflow, row.run_id) or 'not logged (see the warning)'}",
              file=sys.stderr)
    if row.status != Status.OK:
        raise FunctionFailed(f"{fn.__name__} on {devices} × {engine}: {row.status}: {row.error}", row)
    values = function.values(folder, row.run_id)
    return values if all_ranks else values[0]


def summary(row, folder: Path) -> str:
    """The run in one line, as the user's script prints it."""
    where = f"{row.world_size} × {row.engine}"
    if row.throughput:
        t = row.throughput
        engine = f" ({row.engine_startup_s:.1f} s the engine's)" if row.engine_startup_s is not None else ""
        return (f"dtbench: {row.variant} on {where}: {t['median']:.1f} samples/s [{t['ci_low']:.1f}, "
                f"{t['ci_high']:.1f}], start-up {row.startup_s:.1f} s{engine} -> {folder / 'results.jsonl'}")
    return f"dtbench: {row.variant} on {where}: {row.status} -> {folder / 'results.jsonl'}"
