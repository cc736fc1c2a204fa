"""The TensorFlow path most of its users take: the model built under `strategy.scope()`, `model.compile`,
`model.fit`, with the custom loop's model, recipe, input order, normalisation and exact evaluation, so that
what `fit` costs or saves is read against tf-mirrored and tf-multiworker in one table.

The run's clock rides a Keras callback that hooks only the start of each batch and the end of each epoch: a
callback with `on_train_batch_end` makes Keras convert every step's logs to Python floats (a device sync per
step), which neither the custom loop nor a user's plain `fit` does. The step before a batch's start is the one
that has just ended. With the input phases (--input-phases) the callback hands fit a train function of its own
(`ResidentCalls`, Keras' `model.train_function`, which fit looks up at every call): a call the clock holds resident
batches for trains on them with Keras' step, and asks the pipeline for nothing. Under Keras 2 (tf-multiworker-fit, tf_impl/keras_flavour.py) the same code runs: only the
loss tracker's place and the reading of its variables differ. Import this module only after `configure()`
(tf_impl/configure.py) has pinned the process (it imports Keras).
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import tensorflow as tf

from bench.spec import knobs
from bench.spec.task import TaskSpec
from bench.worker import LossCurve, StepClock, Worker
from tf_impl import mlflow_model
from tf_impl import train as loop
from tf_impl.keras_flavour import LEGACY, keras
from tf_impl.flops import flops_per_sample
from tf_impl.knobs import STEPS_PER_EXECUTION
from tf_impl.memory import model_state_bytes, peak_memory_mb
from tf_impl.model import build_model, count_parameters
from tf_impl.profile import TFProfiler
from tf_impl.recipe import make_optimizer


def train_with_fit(worker: Worker, strategy, num_workers: int = 1, worker_index: int = 0) -> dict:
    """Train the task with `model.fit` under `strategy`; this process is worker `worker_index` of `num_workers`."""
    task = worker.task
    global_batch = task.recipe.global_batch
    source = None if worker.synthetic else loop.InputSource.of(worker.spec)
    epochs, steps_per_epoch = (1, worker.timed_steps) if source is None else \
        (task.recipe.epochs, task.steps_per_epoch(source.train_count))
    steps_per_execution = knobs.values((STEPS_PER_EXECUTION,), task.options.knobs)["steps_per_execution"]
    if steps_per_epoch % steps_per_execution:
        raise ValueError(f"--set steps_per_execution={steps_per_execution} must divide the {steps_per_epoch} "
                         "steps of an epoch (or give --steps-per-epoch)")
    with strategy.scope():
        network = build_model(task)
        model = Normalised(network)
        optimizer = make_optimizer(task, steps_per_epoch, epochs)
        # No training metrics: the custom loop computes none either, so the two differ in the loop alone.
        model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      jit_compile=bool(task.options.compile), steps_per_execution=steps_per_execution)
    # The custom loop's exact evaluation (every test image once, across workers), on the network fit trained.
    eval_functions = loop.evaluation_functions(
        strategy, network, keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none"), num_workers)
    # Keras' BackupAndRestore in fit's callbacks, as Keras users checkpoint; the harness times its saves.
    backup = Backup(worker.checkpoint_dir, strategy, steps_per_epoch,
                    barrier=lambda: eval_functions[1](tf.zeros([1], tf.float64)).numpy())
    backup.set_model(model)
    first_epoch = worker.restore(backup)  # 0, or the epoch after a resumed run's last checkpoint
    batches = synthetic_dataset(strategy, task) if source is None else \
        loop.train_dataset(strategy, source, task.recipe.seed, global_batch, steps_per_epoch, range(first_epoch, epochs))

    def sync() -> None:
        """Read the step counter: the read waits for the last step's update (and its all-reduce) to be done."""
        optimizer.iterations.numpy()

    def evaluate_exactly() -> dict:
        return loop.evaluate(*eval_functions, source.test_batches(num_workers, worker_index), worker_index,
                             clocked.epoch_loss_sum(), clocked.steps_this_epoch)

    profiler = TFProfiler(worker, optimizer.name) if worker.profile_windows else None
    # The input phases' resident batches: fetched from fit's own iterator onto the replicas' devices when the
    # clock draws them (ResidentCalls), so identity here.
    clock = worker.clock(global_batch, sync, steps=(epochs - first_epoch) * steps_per_epoch, profiler=profiler,
                         resident=None if source is None else lambda batch: batch)

    def finish() -> dict:
        mlflow_model.save(worker, network, chief=worker_index == 0)  # --mlflow: the network fit trained
        return worker.finish(clock, clocked.evaluation, clocked.epochs_done, peak_memory_mb(), count_parameters(model),
                             flops_per_sample(network) if worker_index == 0 else None,
                             {**loop.fast_path(task), "keras_fit": True,
                              "steps_per_execution": executed_together(model)}, input_wait_s=None,
                             memory={"model_state_bytes": model_state_bytes(model, optimizer)},
                             **({"profile": profiler.result} if profiler else {}))

    clocked = ClockedFit(worker, clock, worker.loss_curve(first_epoch * steps_per_epoch), loss_tracker(model), epochs,
                         steps_per_epoch, steps_per_execution, evaluate_exactly if source else None,
                         (eval_functions[1], steps_per_epoch) if LEGACY else None,
                         backup if task.options.checkpoint_every_epoch else None, finish)
    clock.start()
    model.fit(batches, epochs=epochs, initial_epoch=first_epoch, steps_per_epoch=steps_per_epoch,
              callbacks=[clocked] + ([backup] if task.options.checkpoint_every_epoch else []), verbose=0)
    return clocked.result


def executed_together(model: keras.Model) -> int:
    """The steps one call of fit's compiled function runs, as the compiled model holds it (Keras 2: a variable)."""
    return int(model._steps_per_execution.numpy()) if LEGACY else int(model.steps_per_execution)


def loss_tracker(model: keras.Model):
    """Keras' running mean of the training loss, a `Mean` metric: where Keras 3 and Keras 2 keep it."""
    return model.compiled_loss._total_loss_mean if LEGACY else model._loss_tracker


def read(variable, strategy):
    """A metric variable's value as a tensor left on the device. Keras 3 (one process) reads it summed across the
    replicas. Keras 2 (tf-multiworker-fit) sums this worker's replicas alone: the summed read is a collective
    across workers, which at every kept step halved the run's throughput (3,848 -> 1,982 samples/s, default
    task, 2 workers); the workers' sums are added once an epoch instead (ClockedFit._sum_workers)."""
    if not LEGACY:
        return tf.identity(variable.value)
    return tf.add_n([tf.identity(v) for v in strategy.experimental_local_results(variable)])


def synthetic_dataset(strategy, task: TaskSpec):
    """One random batch per replica, repeated: fit takes its batches from a dataset, so its synthetic twin still
    passes through tf.data (the custom loop's twin feeds a batch already on the devices)."""
    def per_worker(ctx: "tf.distribute.InputContext"):
        size = ctx.get_per_replica_batch_size(task.recipe.global_batch)
        seed = task.recipe.seed + ctx.input_pipeline_id
        return tf.data.Dataset.from_tensors(loop.random_batch(task, size, seed)).repeat()

    return strategy.distribute_datasets_from_function(per_worker)


class Normalised(keras.Model):
    """The task's network behind the custom loop's on-device normalisation (no weights of its own): fit feeds
    it the uint8 batches the custom loop's step gets."""

    def __init__(self, network: keras.Model):
        super().__init__(name=f"normalised_{network.name}")
        self.network = network
        self.built = True  # as its network is (BackupAndRestore restores only into a built model)

    def call(self, images, training=False):
        return self.network(loop.normalise(images), training=training)


class ClockedFit(keras.callbacks.Callback):
    """The custom loop's StepClock, loss curve and end of epoch (pause, exact evaluation, resume) around fit.
    `tracker` is Keras' running mean of the loss: its (sum, count) over the epoch's samples, which reading
    sums across replicas and workers.

    With `steps_per_execution` above 1 Keras calls back once an execution, so the steps are counted by execution
    (the clock refuses a window boundary inside one) and a kept step's loss is its execution's mean."""

    def __init__(self, worker: Worker, clock: StepClock, loss_curve: LossCurve, tracker, epochs: int,
                 steps_per_epoch: int, steps_per_execution: int, evaluate, across_workers: tuple | None = None,
                 checkpoint: "Backup | None" = None, finish: Callable[[], dict] = dict):
        super().__init__()
        # The run's result, recorded at the end of training, before fit returns: fit then drops its dataset
        # iterator, whose destruction waits out tf.data's autotuner (tens of seconds), which the harness does not
        # wait for once every rank's result is in (bench.run.processes.RESULT_GRACE_S).
        self.finish, self.result = finish, None
        self.checkpoint = checkpoint  # saved at each epoch's end, the clock paused (--checkpoint-every-epoch)
        # Keras 2: (a tf.function summing a vector across workers, the steps of an epoch) to add up the workers' kept
        # sums at the epoch's end; None where a read already sums every replica.
        self.across_workers = across_workers
        # Keras 2 converts every batch hook's logs to Python floats (a device sync per step) unless the callbacks
        # that have batch hooks take tensors; this one reads none.
        self._supports_tf_logs = True
        self.worker, self.clock, self.loss_curve, self.tracker = worker, clock, loss_curve, tracker
        self.epochs, self.evaluate = epochs, evaluate
        self.steps_per_epoch, self.steps_per_execution = steps_per_epoch, steps_per_execution
        self.evaluation, self.epochs_done, self.steps_this_epoch = None, 0, 0
        self._sums: dict[int, tuple] = {}  # the tracker after a step of this epoch, kept on the device

    def on_train_begin(self, logs=None):
        if self.clock.phased:  # fit has made its train function by now and looks it up at every call
            self.model.train_function = ResidentCalls(self.model, self.clock, self.steps_per_execution)

    def on_epoch_begin(self, epoch, logs=None):
        self.steps_this_epoch, self._sums = 0, {}

    def on_train_batch_begin(self, batch, logs=None):
        if batch > 0:  # the execution before it has ended: `batch` is the first step of this one
            self._steps_done(batch - self.steps_this_epoch)

    def on_epoch_end(self, epoch, logs=None):
        # The epoch's last execution (fewer steps where the clock stopped training early).
        self._steps_done(min(self.steps_per_execution, self.steps_per_epoch - self.steps_this_epoch))
        if self.across_workers:
            self._sum_workers()
        self.evaluation = self.worker.end_epoch(self.clock, epoch, self.epochs, self.evaluate, self.checkpoint)
        self.epochs_done = epoch + 1

    def on_train_end(self, logs=None):
        self.result = self.finish()

    def _steps_done(self, steps: int) -> None:
        """The execution that has just ended, of `steps` steps. The tracker's sums are kept after it where a step
        the loss curve keeps lies in it or in the next one (a kept step's loss is the difference of the sums after
        its execution and after the one before, read at the epoch's end as the custom loop's are); then each step
        is counted by the loss curve and the clock."""
        first, every = self.loss_curve.step + 1, self.loss_curve.every
        if any(step % every == 0 for step in range(first, first + steps + self.steps_per_execution)):
            strategy = self.model.distribute_strategy
            ended = self.steps_this_epoch + steps
            self._sums[ended] = (read(self.tracker.total, strategy), read(self.tracker.count, strategy))
        for _ in range(steps):
            self.steps_this_epoch += 1
            self.loss_curve.add(StepLoss(self._sums, self.steps_this_epoch), self.clock)  # read where it is kept
        self.clock.steps_done(steps)
        if self.clock.stop:
            self.model.stop_training = True

    def _sum_workers(self) -> None:
        """Every worker's kept (sum, count) pairs added across workers in one collective (a vector of one epoch's
        length, so that it is traced once), every worker taking part."""
        kept = sorted(self._sums)
        if not kept:
            return
        add, steps = self.across_workers
        local = tf.cast(tf.reshape(tf.stack([tf.stack(self._sums[k]) for k in kept]), [-1]), tf.float64)
        summed = add(tf.pad(local, [[0, 2 * steps - 2 * len(kept)]])).numpy()
        self._sums.update({k: (summed[2 * i], summed[2 * i + 1]) for i, k in enumerate(kept)})  # StepLoss reads it

    def epoch_loss_sum(self) -> float:
        """This epoch's per-step losses summed (every step's batch is the same size: the mean times the steps)."""
        return float(self.tracker.result()) * self.steps_this_epoch


class ResidentCalls:
    """fit's train function with the input phases (bench.worker.clock): where the clock holds resident batches for a
    call (a resident window's, drawn from fit's own iterator before it opens), the call trains on them with Keras'
    step, the pipeline asked for nothing (its prefetch idle); every other call is fit's own."""

    def __init__(self, model: keras.Model, clock: StepClock, steps_per_execution: int):
        self.fits_own, self.clock, self.steps = model.train_function, clock, steps_per_execution
        self.fetch = tf.function(lambda iterator: next(iterator))  # inside a tf.function, as fit's step fetches
        self.on_held = held_step(model)

    def __call__(self, iterator):
        held = self.clock.held(lambda: self.fetch(iterator), self.steps)
        return self.fits_own(iterator) if held is None else self.on_held(held)


def held_step(model: keras.Model) -> Callable[[list], object]:
    """Keras' training step over batches already on the replicas' devices, one call each: Keras 3's own train
    function takes a list of batches and runs its compiled step on each; Keras 2's takes only an iterator, so its
    step (train_step under the strategy, the step counter, the logs reduced) is made here the way fit makes it."""
    if not LEGACY:
        return model.train_function
    from tf_keras.src.engine.training import reduce_per_replica

    strategy = model.distribute_strategy

    def run_step(data):
        outputs = model.train_step(data)
        with tf.control_dependencies(tf.nest.flatten(outputs)):
            model._train_counter.assign_add(1)
        return outputs

    if model.jit_compile:
        run_step = tf.function(run_step, jit_compile=True, reduce_retracing=True)

    @tf.function(reduce_retracing=True)
    def one_step(data):
        outputs = strategy.run(run_step, args=(data,))
        return reduce_per_replica(outputs, strategy, reduction=model.distribute_reduction_method)

    def steps(held: list):
        for data in held:
            outputs = one_step(data)
        return outputs

    return steps


class StepLoss:
    """A step's mean loss over the global batch: the difference of the tracker's (sum, count) after its execution
    and after the execution before it in the epoch (none before the first). With one step an execution, the step's
    own loss; with several, their mean."""

    def __init__(self, sums: dict[int, tuple], step_in_epoch: int):
        self.sums, self.step = sums, step_in_epoch

    def __float__(self) -> float:
        ended = min(k for k in self.sums if k >= self.step)
        total, count = (float(v) for v in self.sums[ended])
        before = max((k for k in self.sums if k < self.step), default=None)
        before_total, before_count = (float(v) for v in self.sums[before]) if before is not None else (0.0, 0.0)
        return (total - before_total) / (count - before_count)


class Backup(keras.callbacks.BackupAndRestore):
    """Keras' BackupAndRestore as the harness's checkpoint (save, load): in fit's callbacks as Keras users put it
    (Keras 2 writes a TensorFlow checkpoint of the model and its optimizer, the chief's in chief/, the other
    workers' into folders it deletes; Keras 3 one weights file), kept when fit returns, its save at an epoch's
    end made by the harness with the clock paused (`save`, from ClockedFit) so that the stall is timed apart.
    `load` reads a folder it wrote: the load-back after the last epoch, and --resume-from before fit."""

    async_safe = True  # Keras 3: its batch-end hook does nothing at epoch frequency; not a reason to sync every step

    def __init__(self, directory, strategy, steps_per_epoch: int, barrier):
        super().__init__(str(directory), delete_checkpoint=False)
        self.strategy, self.steps_per_epoch, self.barrier = strategy, steps_per_epoch, barrier

    def on_epoch_end(self, epoch, logs=None):
        pass  # saved through save(), from ClockedFit's end of the epoch

    def save(self, directory, epochs_done: int) -> None:
        super().on_epoch_end(epochs_done - 1)
        self.barrier()  # no worker reads the chief's files before they are complete

    def load(self, directory) -> int:
        """Restore the model and its optimizer from what `save` wrote into `directory`; the epochs it had trained."""
        optimizer = self.model.optimizer
        with self.strategy.scope():
            optimizer.build(self.model.trainable_variables)  # its slots, to restore into
        if LEGACY:
            latest = tf.train.latest_checkpoint(str(Path(directory) / "chief"))
            if latest is None:
                raise FileNotFoundError(f"no Keras backup in {directory}")
            tf.train.Checkpoint(model=self.model).restore(latest).expect_partial()
        else:
            self.model.load_weights(str(Path(directory) / "latest.weights.h5"))
        return int(optimizer.iterations.numpy()) // self.steps_per_epoch
