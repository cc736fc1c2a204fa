"""pytest-benchmark: one training step of the TensorFlow loop (default task, default strategy).

    pytest benchmarks/test_tf_step.py --benchmark-only [--benchmark-autosave | --benchmark-compare-fail=mean:5%]
"""
import os
from types import SimpleNamespace

import numpy as np
import pytest

from bench.spec.task import get_task


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_tf_training_step(benchmark, precision):
    from tf_impl.configure import configure

    task = get_task("default", precision=precision)
    worker = SimpleNamespace(task=task, device_type="cpu", pin=lambda loader_processes=True: len(os.sched_getaffinity(0)))
    tf = configure(worker)
    from tf_impl import train  # imports TensorFlow: after configure() sized its pools

    strategy = tf.distribute.get_strategy()
    _, _, _, train_step, _ = train.build_training(task, strategy, steps_per_epoch=4, epochs=1)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (task.recipe.global_batch * 4, 28, 28, 1), dtype=np.uint8)
    labels = rng.integers(0, task.model.classes, task.recipe.global_batch * 4).astype(np.int64)
    source = train.InputSource((images, labels), (images[:0], labels[:0]))
    batches = iter(train.train_dataset(strategy, source, task.recipe.seed, task.recipe.global_batch, 4, range(10**6)))

    def step():
        train_step(batches).numpy()  # fetching the loss waits for the step

    benchmark.extra_info.update(samples_per_step=task.recipe.global_batch)
    benchmark(step)
