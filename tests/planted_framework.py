"""Planted effects, for testing `bench tune`: a NumPy approach (the plug-in framework of tests/numpy_framework.py)
whose knobs change its speed by known shares and nothing else. Each step multiplies ROWS x BASE x (1 - save) /
(1 - cost) rows of the batch (cycled) by a fixed matrix: `cost` adds that share of the step's work, `save` takes that
share off, `null` does nothing. Work, not a sleep: on a loaded machine a sleep's wake-up latency, the same for every
setting, dilutes a planted sleep (measured: a 5 % sleep read as 1.00 there). Joins as
DTBENCH_PLUGINS=tests.planted_framework."""
from __future__ import annotations

import os

import numpy as np

from bench.spec.knobs import Knob, boolean
from bench.spec.variants import Variant
from tests.numpy_framework import FRAMEWORK, _evaluate, _flat

__all__ = ["FRAMEWORK", "VARIANTS", "KNOBS"]

BASE = 1.25   # the defaults' work: a quarter more than ROWS (room for `save` to take off)
ROWS = 256    # 5 % of ROWS x BASE is 16 rows: the shares hold to a row
HIDDEN = 512  # the product's width: a few milliseconds a step on one core


def share(text: str) -> float:
    value = float(text)
    if not 0 <= value < 1:
        raise ValueError(f"{text!r} is not a share between 0 and 1")
    return value


# The share the tuner is offered (DTBENCH_PLANTED_SHARE): 5 % in the committed rates' tunings, larger in the suite's
# test, which shares its machine with another worker's runs.
PLANTED = float(os.environ.get("DTBENCH_PLANTED_SHARE", "0.05"))
KNOBS = (
    Knob("cost", "a planted cost: this share of each step added", share, 0.0, (PLANTED,)),
    Knob("save", "a planted saving: this share of each step taken off", share, 0.0, (PLANTED,)),
    Knob("null", "a planted null: changes nothing", boolean, False, (True,)),
)

VARIANTS = (
    Variant("numpy-planted", "numpy", "numpy", "bench.run.launch:PYTHON", "tests.planted_framework",
            single_process=True, spans_nodes=False, max_devices=1, in_default_sweep=False,
            summary="NumPy with planted costs and savings (a test's plug-in, for `bench tune`)",
            checkpoints=False, compiles=False, reads_files=False, profiles=False,
            knobs="tests.planted_framework:KNOBS"),
)


def main() -> None:
    from bench.spec import knobs
    from bench.worker import Worker, data, spec_path_from_argv

    worker = Worker(spec_path_from_argv())
    with worker.session():
        worker.pin()
        worker.joined(1, backend="none", device="cpu")
        task, arrays = worker.task, data.load(worker.spec.data_path)
        chosen = knobs.values(KNOBS, task.options.knobs)
        rows = round(ROWS * BASE * (1 - chosen["save"]) / (1 - chosen["cost"]))
        x, y = _flat(arrays["train_x"]), np.asarray(arrays["train_y"])
        batch = task.recipe.global_batch
        work = np.random.default_rng(0).standard_normal((x.shape[1], HIDDEN)).astype(np.float32)
        steps_per_epoch, epochs = task.recipe.steps_per_epoch or len(x) // batch, task.recipe.epochs  # cycling
        clock = worker.clock(batch, lambda: None, steps=epochs * steps_per_epoch)
        clock.start()
        evaluation = None
        weights = np.zeros((x.shape[1], task.model.classes), dtype=np.float32)
        for epoch in range(epochs):
            batches = (np.arange(i * batch, (i + 1) * batch) % len(x) for i in range(steps_per_epoch))
            for index in clock.timed(batches):
                rows_of = x[np.arange(index[0], index[0] + rows) % len(x)]
                hidden = rows_of @ work
                work -= 1e-6 * (rows_of.T @ hidden)
            evaluation = worker.end_epoch(clock, epoch, epochs, lambda: _evaluate(weights, arrays))
        worker.finish(clock, evaluation, epochs, peak_memory_mb=0.0, params=work.size)


if __name__ == "__main__":
    main()
