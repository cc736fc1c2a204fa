"""Checkpoints as TensorFlow writes them: a `tf.train.Checkpoint` of the model and the optimizer (and
the epoch count) through a `CheckpointManager` that keeps the last one. Under MultiWorkerMirroredStrategy
saving is a collective every worker joins: the chief writes into the run's folder, the others into a
temporary folder they then delete (the pattern of TensorFlow's multi-worker training guide)."""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Callable

import tensorflow as tf


class TFCheckpoint:
    def __init__(self, model, optimizer, worker_index: int, barrier: Callable[[], object]):
        self.worker_index, self.barrier = worker_index, barrier
        self.epochs_done = tf.Variable(0, dtype=tf.int64, trainable=False)
        self.checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, epochs_done=self.epochs_done)

    def save(self, directory: Path, epochs_done: int) -> None:
        self.epochs_done.assign(epochs_done)
        chief = self.worker_index == 0
        target = directory if chief else directory.parent / f"tmp/checkpoint-worker{self.worker_index}"
        tf.train.CheckpointManager(self.checkpoint, str(target), max_to_keep=1).save(checkpoint_number=epochs_done)
        if not chief:
            shutil.rmtree(target, ignore_errors=True)
        self.barrier()  # no worker reads the chief's checkpoint before it is complete

    def load(self, directory: Path) -> int:
        latest = tf.train.latest_checkpoint(str(directory))
        if latest is None:
            raise FileNotFoundError(f"no TensorFlow checkpoint in {directory}")
        self.checkpoint.restore(latest).assert_existing_objects_matched()
        return int(self.epochs_done.numpy())
