"""A plain single-device TensorFlow loop with no strategy and no harness: the overhead baseline of tf-single.

The loop a Keras user writes from the custom-training guide: the same model, batch, data and core as a 1-device
tf-single run, one intra-op and one inter-op thread per core, a `tf.function`
step with a `GradientTape`, timed the same way (warm-up, then windows bounded by fetching the last loss). A
synthetic task trains one random batch already normalised in memory; otherwise a shuffled, batched, prefetched
tf.data input. Prints one JSON line.

Its input follows the tf.data performance guide ("vectorize the map"): shuffle sample indices, batch them, gather
each batch's images at once, as the harness does. Shuffling the images themselves through a whole-set buffer,
the guide's first example, spends the run's one core copying 60,000 images a pass, and would measure that
pipeline rather than the harness.
"""
from __future__ import annotations

import os
import sys

from bench.spec.rank_spec import RankSpec


def main(spec_path: str) -> None:
    spec = RankSpec.load(spec_path)
    task = spec.task
    cores = spec.node_plans[0].cpu_slots[0]
    os.sched_setaffinity(0, cores)
    import tensorflow as tf
    import keras

    # One intra-op and one inter-op thread a core: what TensorFlow picks by itself in a pinned process, said here.
    tf.config.threading.set_intra_op_parallelism_threads(len(cores))
    tf.config.threading.set_inter_op_parallelism_threads(len(cores))

    from probes.windows import Windows
    from tf_impl.model import build_model

    model = build_model(task)
    optimizer = keras.optimizers.SGD(learning_rate=task.recipe.lr, momentum=task.recipe.momentum)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    batches = iter(synthetic(tf, task) if task.synthetic else from_memory(tf, spec))

    @tf.function
    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    losses = []
    windows = Windows(task, sync=lambda: losses[-1].numpy())  # the last step has run once its loss exists
    for _ in range(windows.steps):
        losses = [step(*next(batches))]
        windows.step_done()
    windows.report()


def synthetic(tf, task):
    side, channels, batch = task.model.image_size, task.model.channels, task.recipe.global_batch
    x = tf.random.stateless_normal((batch, side, side, channels), seed=(task.recipe.seed, 0))
    y = tf.random.stateless_uniform((batch,), seed=(task.recipe.seed, 1), maxval=task.model.classes, dtype=tf.int64)
    while True:
        yield x, y


def from_memory(tf, spec: RankSpec):
    from bench.worker import data as cache

    task = spec.task
    arrays = cache.load(spec.data_path, mmap=False)
    train_x, train_y = tf.constant(arrays["train_x"]), tf.constant(arrays["train_y"])

    def normalised(at):
        return (tf.cast(tf.gather(train_x, at), tf.float32) / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD, \
            tf.gather(train_y, at)

    return (tf.data.Dataset.range(len(arrays["train_y"])).shuffle(len(arrays["train_y"]), seed=task.recipe.seed)
            .repeat().batch(task.recipe.global_batch, drop_remainder=True)
            .map(normalised, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE))


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--spec") + 1])
