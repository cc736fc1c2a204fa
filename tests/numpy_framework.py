"""A third framework in one record, for tests: NumPy, training a softmax regression on the task's images through
dtbench's worker API. It joins as a plug-in (DTBENCH_PLUGINS=tests.numpy_framework): the record, one variant and its
rank loop, with nothing in the harness changed."""
from __future__ import annotations

import numpy as np

from bench.spec.frameworks import Framework
from bench.spec.variants import Variant

FRAMEWORK = Framework(name="numpy", title="NumPy", package="numpy", extra="data",
                      model_check="tests.numpy_framework", panels=("NumPy",))

VARIANTS = (
    Variant("numpy-single", "numpy", "numpy", "bench.run.launch:PYTHON", "tests.numpy_framework",
            single_process=True, spans_nodes=False, max_devices=1, in_default_sweep=False,
            summary="NumPy, a softmax regression on one core (a test's plug-in framework)",
            checkpoints=False, compiles=False, reads_files=False, profiles=False),
)


def main() -> None:
    from bench.worker import Worker, data, spec_path_from_argv

    worker = Worker(spec_path_from_argv())
    with worker.session():
        worker.pin()
        worker.joined(1, backend="none", device="cpu")
        task, arrays = worker.task, data.load(worker.spec.data_path)
        x, y = _flat(arrays["train_x"]), np.asarray(arrays["train_y"])
        classes, batch = task.model.classes, task.recipe.global_batch
        rng = np.random.default_rng(task.recipe.seed)
        weights = np.zeros((x.shape[1], classes), dtype=np.float32)
        steps_per_epoch, epochs = len(x) // batch, task.recipe.epochs
        clock = worker.clock(batch, lambda: None, steps=epochs * steps_per_epoch)
        clock.start()
        evaluation = None
        for epoch in range(epochs):
            order = rng.permutation(len(x))
            batches = (order[i * batch:(i + 1) * batch] for i in range(steps_per_epoch))
            for index in clock.timed(batches):
                logits = x[index] @ weights
                p = np.exp(logits - logits.max(axis=1, keepdims=True))
                p /= p.sum(axis=1, keepdims=True)
                p[np.arange(len(index)), y[index]] -= 1
                weights -= task.recipe.lr * (x[index].T @ p) / len(index)
            evaluation = worker.end_epoch(clock, epoch, epochs, lambda: _evaluate(weights, arrays))
        worker.finish(clock, evaluation, epochs, peak_memory_mb=0.0, params=weights.size)


def _flat(images) -> np.ndarray:
    return np.asarray(images, dtype=np.float32).reshape(len(images), -1) / 255.0


def _evaluate(weights: np.ndarray, arrays: dict) -> dict:
    """Every test sample once."""
    test_x, test_y = _flat(arrays["test_x"]), np.asarray(arrays["test_y"])
    correct = int(((test_x @ weights).argmax(axis=1) == test_y).sum())
    return {"test_accuracy": correct / len(test_y), "test_loss": None, "eval_samples": len(test_y)}


if __name__ == "__main__":
    main()
