"""The training loop of the JAX variants, top to bottom: one `jax.jit` step over a device mesh.

Every variant is this one program. The mesh holds every device of the run (one, the node's, or every process's):
the parameters and optimizer state are replicated over it, each global batch is sharded along its "data" axis,
and XLA inserts the gradients' all-reduce where the replicated update needs it. The step is compiled ahead of
time, before the clock starts (its compile time is start-up, recorded, never in a window), and donates the old
parameters' and optimizer state's buffers to the new ones. Same data order policy, recipe, schedule and exact
evaluation over the whole test set as the PyTorch and TensorFlow loops.
"""
from __future__ import annotations

import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec as P

from bench.worker import Worker, peak_rss_mb
from bench.worker import data as cache
from jax_impl.model import build_model, count_parameters
from jax_impl.recipe import make_optimizer

EVAL_BATCH = cache.EVAL_BATCH


def normalise(images):
    """uint8 NHWC images as the model takes them (a synthetic batch is made normalised already)."""
    if jnp.issubdtype(images.dtype, jnp.floating):
        return images
    return (images.astype(jnp.float32) / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD


def train(worker: Worker) -> dict:
    task, global_batch = worker.task, worker.task.recipe.global_batch
    mesh = Mesh(np.array(jax.devices()), ("data",))
    batched, replicated = NamedSharding(mesh, P("data")), NamedSharding(mesh, P())
    process, processes = jax.process_index(), jax.process_count()
    arrays = None if worker.synthetic else cache.load(worker.spec.data_path, mmap=False)
    epochs, steps_per_epoch = (1, worker.timed_steps) if arrays is None else \
        (task.recipe.epochs, task.steps_per_epoch(len(arrays["train_y"])))

    params, apply = build_model(task)
    optimizer = make_optimizer(task, steps_per_epoch, epochs)
    params = jax.tree.map(lambda leaf: replicate(np.asarray(leaf), replicated), params)
    opt_state = jax.jit(optimizer.init, out_shardings=replicated)(params)

    def loss_of(params, images, labels):
        logits = apply(params, normalise(images))
        return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()

    def train_step(params, opt_state, images, labels):
        loss, grads = jax.value_and_grad(loss_of)(params, images, labels)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    side, channels = task.input_shape
    images_type = jnp.float32 if arrays is None else jnp.uint8
    started = time.perf_counter()
    step = jax.jit(train_step, donate_argnums=(0, 1), out_shardings=(replicated, replicated, replicated)).lower(
        params, opt_state, jax.ShapeDtypeStruct((global_batch, side, side, channels), images_type, sharding=batched),
        jax.ShapeDtypeStruct((global_batch,), jnp.int32, sharding=batched)).compile()
    compile_s = time.perf_counter() - started

    def to_device(batch):
        """This process's share of a global batch, as its part of the batch sharded over the mesh."""
        return tuple(jax.make_array_from_process_local_data(batched, part) for part in batch)

    if arrays is None:  # one batch made on the devices, trained again and again: no input pipeline
        device_batch = to_device(random_batch(task, global_batch // processes, task.recipe.seed + process))
        batches = lambda epoch: (device_batch for _ in range(steps_per_epoch))  # noqa: E731
    else:
        train_x, train_y = arrays["train_x"], arrays["train_y"].astype(np.int32)

        def batches(epoch: int):
            """The epoch's order from (seed, epoch) alone; this process reads its slice of every global batch."""
            order = np.random.default_rng((task.recipe.seed, epoch)).permutation(len(train_y))
            share = global_batch // processes
            for i in range(steps_per_epoch):
                mine = order[i * global_batch + process * share:i * global_batch + (process + 1) * share]
                yield train_x[mine], train_y[mine]

    losses = []  # this epoch's per-step losses, on the devices

    def sync() -> None:
        """The last step's loss exists only once the step (and its all-reduce) has run."""
        if losses:
            losses[-1].block_until_ready()

    def evaluate_exactly() -> dict:
        local = jax.tree.map(lambda leaf: leaf.addressable_data(0), params)
        totals = evaluate(apply, local, arrays["test_x"][process::processes],
                          arrays["test_y"][process::processes].astype(np.int32))
        correct, count, loss_sum = sum_over_processes(totals)
        train_loss = float(np.mean([np.asarray(loss.addressable_data(0)) for loss in losses]))
        return {"test_accuracy": correct / count, "test_loss": loss_sum / count, "eval_samples": int(count),
                "train_loss": train_loss}

    clock = worker.clock(global_batch, sync, steps=epochs * steps_per_epoch,
                         resident=None if arrays is None else to_device)
    loss_curve = worker.loss_curve()
    clock.start()
    evaluation, epoch = None, 0
    for epoch in range(epochs):
        losses = []
        for held in clock.timed(batches(epoch)):
            # A host batch, or one the input phases made resident on the devices already.
            images, labels = held if isinstance(held[0], jax.Array) else to_device(held)
            params, opt_state, loss = step(params, opt_state, images, labels)
            losses.append(loss)
            loss_curve.add(loss, clock)
        evaluation = worker.end_epoch(clock, epoch, epochs, None if arrays is None else evaluate_exactly)
        if clock.stop:
            break
    cost = step.cost_analysis()
    cost = cost[0] if isinstance(cost, list) else cost
    return worker.finish(clock, evaluation, epoch + 1, peak_memory_mb(), count_parameters(params),
                         fast_path={"jit": True, "compile_s": compile_s, "donated_buffers": True,
                                    "xla_flags": os.environ.get("XLA_FLAGS", ""),
                                    "xla_flops_per_step": float(cost.get("flops", 0.0)) if cost else None,
                                    "mesh_devices": len(jax.devices())})


def replicate(value: np.ndarray, sharding: NamedSharding) -> jax.Array:
    """The same host value on every device of the mesh, across processes too (each process puts its own copies)."""
    return jax.make_array_from_callback(value.shape, sharding, lambda index: value[index])


def random_batch(task, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """`size` random normalised NHWC images of the task's shape and labels, drawn from `seed` alone."""
    rng = np.random.default_rng(seed)
    side, channels = task.model.image_size, task.model.channels
    images = rng.integers(0, 256, (size, side, side, channels)).astype(np.float32)
    images = (images / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD
    return images.astype(np.float32), rng.integers(0, task.model.classes, size).astype(np.int32)


def evaluate(apply, params, test_x: np.ndarray, test_y: np.ndarray) -> np.ndarray:
    """(correct, count, loss sum) over this process's share of the test set, on its first device."""

    @jax.jit
    def eval_batch(images, labels):
        logits = apply(params, normalise(images))
        loss = optax.softmax_cross_entropy_with_integer_labels(logits, labels).sum()
        return (logits.argmax(axis=1) == labels).sum(), loss

    correct = loss = 0.0
    for start in range(0, len(test_y), EVAL_BATCH):
        c, l = eval_batch(test_x[start:start + EVAL_BATCH], test_y[start:start + EVAL_BATCH])
        correct, loss = correct + int(c), loss + float(l)
    return np.array([correct, len(test_y), loss], np.float32)


def sum_over_processes(values: np.ndarray) -> list[float]:
    """Every process's values summed (each process holds its own share's)."""
    if jax.process_count() > 1:
        values = np.asarray(multihost_utils.process_allgather(values)).reshape(jax.process_count(), -1).sum(axis=0)
    return values.tolist()


def peak_memory_mb() -> float:
    """The first device's peak where the device reports one (GPUs), else this process's peak resident memory."""
    stats = jax.local_devices()[0].memory_stats() or {}
    return stats["peak_bytes_in_use"] / 2**20 if "peak_bytes_in_use" in stats else peak_rss_mb()
