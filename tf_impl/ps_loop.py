"""tf-ps's loop, on its chief: ParameterServerStrategy. A chief, one worker per device slot and one parameter server per node, each a
process of its own given its TF_CONFIG (on loopback, or across hosts from the node agents' meeting). Training
is ASYNCHRONOUS: each worker pulls the variables, computes the gradients of its own batch and pushes its
update to the parameter servers without waiting for the others, so updates are applied to weights other
workers have moved meanwhile.

Read top to bottom, the chief's loop (its strategy and ClusterCoordinator come from tf_impl/strategies.py): the model and
optimizer made under the strategy's scope (their variables live on the parameter servers); each worker's own
dataset (`create_per_worker_dataset`: every worker reads the whole training set in an order of its own, so
an epoch is as many samples as the set, not each sample exactly once); every step scheduled onto whichever
worker is free (`coordinator.schedule`); `coordinator.join()` at the clock's window boundaries; exact
evaluation on the chief, which reads the variables from the parameter servers. The workers and parameter
servers only serve (`tf.distribute.Server.join()`) until the harness ends them with the run.

One update trains on one worker's batch (the global batch / workers) at the unscaled learning rate, and the
schedule counts updates: as the one-device loop does, W times at once.
"""
from __future__ import annotations

import tensorflow as tf

from bench.worker import Worker
from tf_impl import memory, mlflow_model, train
from tf_impl.flops import flops_per_sample
from tf_impl.model import count_parameters


class Fetched:
    """A step's loss as the loss curve reads it (float()): fetched from its worker once the clock is paused."""

    def __init__(self, remote):
        self.remote = remote

    def __float__(self) -> float:
        return float(self.remote.fetch())


def serve(worker: Worker, config: dict) -> None:
    """A worker or parameter server: report where it runs, then serve the chief's functions until killed."""
    cluster, role = config["cluster"], config["task"]  # TF_CONFIG's task: this process's job and index
    worker.joined(len(cluster["worker"]), role=role["type"], task_index=role["index"])
    # The server runs the chief's functions on pools of its own, sized from this config, not from
    # tf.config.threading: left to its default (the cores it may use: one on a pinned slot), its single
    # inter-op thread blocks on the parameter server's reply and the run deadlocks.
    threads = tf.config.threading.get_intra_op_parallelism_threads()
    pools = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                     inter_op_parallelism_threads=tf.config.threading.get_inter_op_parallelism_threads())
    server = tf.distribute.Server(tf.train.ClusterSpec(cluster), job_name=role["type"], task_index=role["index"],
                                  protocol="grpc", config=pools, start=True)
    server.join()


def train_async(worker: Worker, strategy, coordinator, num_workers: int) -> dict:
    task = worker.task
    per_update = task.recipe.global_batch // num_workers
    source = None if worker.synthetic else train.InputSource.of(worker.spec)
    recipe = task.recipe
    epochs, rounds = (1, worker.timed_steps) if source is None else (recipe.epochs, task.steps_per_epoch(source.train_count))
    update_task = task.replace(global_batch=per_update, lr_scale=1.0)
    model, optimizer, loss_fn, _, train_step_on = train.build_training(update_task, strategy, rounds * num_workers,
                                                                      epochs)

    def per_worker_dataset():
        if source is None:  # one random batch made on the worker, trained again and again
            side, channels = task.model.image_size, task.model.channels
            images = tf.cast(tf.random.uniform((per_update, side, side, channels), maxval=256, dtype=tf.int32), tf.uint8)
            labels = tf.random.uniform((per_update,), maxval=task.model.classes, dtype=tf.int64)
            return tf.data.Dataset.from_tensors((images, labels)).repeat()
        order = tf.data.Dataset.range(source.train_count).shuffle(source.train_count).repeat()
        return source.batches(order, source.train, per_update).prefetch(tf.data.AUTOTUNE)

    batches = iter(coordinator.create_per_worker_dataset(per_worker_dataset))

    @tf.function
    def update(iterator):
        return train_step_on(*next(iterator))

    eval_batch, _ = train.evaluation_functions(strategy, model, loss_fn, 1)
    losses = []

    def evaluate_exactly() -> dict:
        fetched = [float(loss.fetch()) for loss in losses]
        return train.evaluate(eval_batch, lambda totals: totals, source.test_batches(1, 0), 0, sum(fetched),
                              len(fetched))

    clock = worker.clock(task.recipe.global_batch, coordinator.join, steps=epochs * rounds)
    loss_curve = worker.loss_curve(0)
    clock.start()
    for epoch in range(epochs):
        losses = []
        for _ in clock.timed(range(rounds)):  # a round: one update per worker, the global batch in all
            losses += [coordinator.schedule(update, args=(batches,)) for _ in range(num_workers)]
            loss_curve.add(Fetched(losses[-1]), clock)
        evaluation = worker.end_epoch(clock, epoch, epochs, evaluate_exactly if source else None)
        if clock.stop:
            break
    mlflow_model.save(worker, model, chief=True)  # --mlflow: the variables the parameter servers hold
    return worker.finish(clock, evaluation, epoch + 1, memory.peak_memory_mb(), count_parameters(model),
                         flops_per_sample(model), train.fast_path(task), input_wait_s=None,
                         # on the parameter servers, once (each worker pulls what a step needs)
                         memory={"model_state_bytes": memory.model_state_bytes(model, optimizer)})
