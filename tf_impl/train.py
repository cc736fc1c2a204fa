"""The training loop of the TensorFlow variants, top to bottom: a custom loop under a tf.distribute strategy.

A variant makes its strategy (the default one, MirroredStrategy, MultiWorkerMirroredStrategy) and calls `train`:
`strategy.run` inside a `tf.function`, the loss averaged over the global batch (`tf.nn.compute_average_loss`).
`model.fit` is tf_impl/fit.py (tf-mirrored-fit, tf-multiworker-fit). Same SGD, learning
rate, seed policy and on-device normalisation as the PyTorch variants. Imported once tf_impl/configure.py has
pinned the process and sized TensorFlow's pools (tf_impl/rank.py).
"""
from __future__ import annotations

import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port  # the switch TensorFlow itself reads (IsMklEnabled)

from bench.spec.rank_spec import RankSpec
from bench.spec.task import TaskSpec
from bench.worker import Worker
from bench.worker import data as cache
from tf_impl import mlflow_model
from tf_impl.checkpoint import TFCheckpoint
from tf_impl.flops import flops_per_sample
from tf_impl.keras_flavour import keras
from tf_impl.memory import model_state_bytes, peak_memory_mb
from tf_impl.model import build_model, count_parameters
from tf_impl.profile import TFProfiler
from tf_impl.recipe import make_optimizer

EVAL_BATCH = cache.EVAL_BATCH


def normalise(images):
    """uint8 images as the model takes them; a synthetic batch is made normalised already (float: as it is)."""
    if images.dtype.is_floating:
        return images
    return (tf.cast(images, tf.float32) / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD


def train(worker: Worker, strategy, num_workers: int = 1, worker_index: int = 0) -> dict:
    """Train the task under `strategy`; this process is worker `worker_index` of `num_workers`."""
    task = worker.task
    global_batch = task.recipe.global_batch
    source = None if worker.synthetic else InputSource.of(worker.spec)
    epochs, steps_per_epoch = (1, worker.timed_steps) if source is None else \
        (task.recipe.epochs, task.steps_per_epoch(source.train_count))
    model, optimizer, loss_fn, train_step, train_step_on = build_training(task, strategy, steps_per_epoch, epochs)
    eval_functions = evaluation_functions(strategy, model, loss_fn, num_workers)
    # Every worker waits until the chief has written (a one-number sum across workers).
    checkpoint = TFCheckpoint(model, optimizer, worker_index,
                              barrier=lambda: eval_functions[1](tf.zeros([1], tf.float64)).numpy())
    first_epoch = worker.restore(checkpoint)  # 0, or the epoch after a resumed run's last checkpoint
    if source is None:  # one batch made on the devices, trained again and again: no input pipeline
        device_batch = synthetic_batch(strategy, task)

        def step():
            return train_step_on(*device_batch)
    else:
        batches = iter(train_dataset(strategy, source, task.recipe.seed, global_batch, steps_per_epoch,
                                     range(first_epoch, epochs)))

        def step():
            return train_step(batches)
        # The input phases' resident batch: the next one fetched from the pipeline onto the replicas' devices
        # (inside a tf.function, as the step fetches it), trained by the step that takes a batch on the devices.
        fetch = tf.function(lambda: next(batches))

    losses = []  # this epoch's per-step losses, on the device

    def sync() -> None:
        """Fetch the last step's loss: it exists only once the step (and its all-reduce) has run."""
        if losses:
            losses[-1].numpy()

    def evaluate_exactly() -> dict:
        train_loss_sum = float(tf.add_n(losses).numpy())
        return evaluate(*eval_functions, source.test_batches(num_workers, worker_index), worker_index,
                        train_loss_sum, len(losses))

    profiler = TFProfiler(worker, optimizer.name) if worker.profile_windows else None
    clock = worker.clock(global_batch, sync, steps=(epochs - first_epoch) * steps_per_epoch, profiler=profiler,
                         resident=None if source is None else lambda _: fetch())
    loss_curve = worker.loss_curve(first_epoch * steps_per_epoch)
    clock.start()
    for epoch in range(first_epoch, epochs):
        losses = []
        for held in clock.timed(range(steps_per_epoch)):
            # A step index: the step fetches its batch; a resident window's batch: already on the devices.
            losses.append(step() if isinstance(held, int) else train_step_on(*held))
            loss_curve.add(losses[-1], clock)
        # The clock pauses meanwhile: the checkpoint (if the task asks) and the exact evaluation.
        evaluation = worker.end_epoch(clock, epoch, epochs, evaluate_exactly if source else None, checkpoint)
        if clock.stop:
            break
    mlflow_model.save(worker, model, chief=worker_index == 0)  # --mlflow: the trained model
    # The batch is fetched inside the step (a tf.function, tf.data prefetching): no host-side wait to time.
    return worker.finish(clock, evaluation, epoch + 1, peak_memory_mb(), count_parameters(model),
                         flops_per_sample(model) if worker_index == 0 else None, fast_path(task), input_wait_s=None,
                         memory={"model_state_bytes": model_state_bytes(model, optimizer)},
                         **({"profile": profiler.result} if profiler else {}))


def fast_path(task: TaskSpec) -> dict:
    """What TensorFlow's performance guide asks for and this run has: oneDNN's CPU kernels (set before the import:
    tf_impl.fast_path); NHWC is Keras' own layout; TF32
    is on by default on GPUs; XLA (`jit_compile`) with --compile; tf.data prefetching (and parallel
    decoding of files with --loader-workers)."""
    gpu = bool(tf.config.list_logical_devices("GPU"))
    return {"onednn": bool(_pywrap_util_port.IsMklEnabled()), "channels_last": True, "tf32": gpu and tf.config.experimental.tensor_float_32_execution_enabled(),
            "prefetch": True, "compile": bool(task.options.compile), "parallel_decode": task.data.loader_workers}


def build_training(task: TaskSpec, strategy, steps_per_epoch: int, epochs: int):
    """The model, its optimizer (on the task's schedule over `epochs` x `steps_per_epoch` steps), the loss
    and the distributed training step, as a tf.function taking the batch iterator and as one taking a
    batch already on the devices."""
    global_batch, fp16 = task.recipe.global_batch, task.recipe.precision == "fp16"
    with strategy.scope():
        model = build_model(task)
        optimizer = make_optimizer(task, steps_per_epoch, epochs)
        if fp16:
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        # Build the slots (momentum) here, under the scope: built lazily inside strategy.run,
        # Keras 3's SGD with momentum fails under MirroredStrategy ("must feed a value for placeholder").
        optimizer.build(model.trainable_variables)
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction=None)

    def loss_and_gradients(images, labels):
        with tf.GradientTape() as tape:
            logits = model(normalise(images), training=True)
            loss = tf.nn.compute_average_loss(loss_fn(labels, logits), global_batch_size=global_batch)
            scaled = optimizer.scale_loss(loss) if fp16 else loss
        return loss, tape.gradient(scaled, model.trainable_variables)

    if task.options.compile:
        # XLA for the forward and backward pass. The update stays outside: under MirroredStrategy it
        # all-reduces across the replicas' devices, which one XLA cluster cannot span.
        loss_and_gradients = tf.function(loss_and_gradients, jit_compile=True)

    def replica_step(images, labels):
        loss, grads = loss_and_gradients(images, labels)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def train_step_on(images, labels):
        per_replica = strategy.run(replica_step, args=(images, labels))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    @tf.function
    def train_step(iterator):
        # next() inside the tf.function: the distributed iterator's eager path fails on logical CPUs.
        return train_step_on(*next(iterator))

    return model, optimizer, loss_fn, train_step, tf.function(train_step_on)


def synthetic_batch(strategy, task: TaskSpec):
    """Each replica's share of one random global batch, made on its own device (normalised NHWC, int64 labels)."""
    per_replica = task.recipe.global_batch // strategy.num_replicas_in_sync

    def make(ctx: "tf.distribute.ValueContext"):
        return random_batch(task, per_replica, task.recipe.seed + ctx.replica_id_in_sync_group)

    return strategy.experimental_distribute_values_from_function(make)


def random_batch(task: TaskSpec, size: int, seed: int):
    """`size` random images of the task's shape and labels (int64), drawn from `seed` alone: uint8 NHWC
    normalised once here, as a synthetic benchmark's batch is (normalising it again each step cost the small
    CNN about 4 % of its step in PyTorch, probes/step_ab.py)."""
    side, channels = task.model.image_size, task.model.channels
    images = tf.random.stateless_uniform((size, side, side, channels), seed=(seed, 0), maxval=256, dtype=tf.int32)
    labels = tf.random.stateless_uniform((size,), seed=(seed, 1), maxval=task.model.classes, dtype=tf.int64)
    return normalise(tf.cast(images, tf.uint8)), labels


class InputSource:
    """The run's images for tf.data: the cached arrays, or files (a folder or an S3 prefix) decoded in the
    pipeline by `loader_workers` parallel map calls (0: one at a time)."""

    def __init__(self, train: tuple, test: tuple, load=None, workers: int = 0):
        """`train`, `test`: (images, labels), images as arrays or, with `load`, as file names it decodes."""
        self.train, self.test, self.load, self.workers = train, test, load, workers

    @classmethod
    def of(cls, spec: RankSpec) -> "InputSource":
        """The run's own: its image files (a folder or an S3 prefix), else the cached arrays."""
        task = spec.task
        if task.data.input in ("files", "s3"):
            from tf_impl import files

            found = files.listing(spec)
            return cls(*[(found.files[s], found.labels[s]) for s in ("train", "test")],
                       load=files.image_loader(task, spec.images), workers=task.data.loader_workers)
        arrays = cache.load(spec.data_path, mmap=False)
        return cls(*[(arrays[f"{s}_x"], arrays[f"{s}_y"]) for s in ("train", "test")])

    @property
    def train_count(self) -> int:
        return len(self.train[1])

    def batches(self, indices, split: tuple, batch: int):
        """The images and labels at `indices` (a dataset of sample indices), batched."""
        images, labels = tf.constant(split[0]), tf.constant(split[1])
        if self.load is None:  # in memory: gather whole batches
            return indices.batch(batch, drop_remainder=True).map(
                lambda at: (tf.gather(images, at), tf.gather(labels, at)), num_parallel_calls=tf.data.AUTOTUNE,
                deterministic=True)
        decoded = indices.map(lambda at: (self.load(images[at]), labels[at]),
                              num_parallel_calls=self.workers or None, deterministic=True)
        return decoded.batch(batch, drop_remainder=True)

    def test_batches(self, num_workers: int, worker_index: int):
        """Worker w's share of the test set (samples w, w+W, ...), in batches of EVAL_BATCH."""
        if self.load is None:
            xs, ys = self.test[0][worker_index::num_workers], self.test[1][worker_index::num_workers]
            return ((tf.constant(xs[s:s + EVAL_BATCH]), tf.constant(ys[s:s + EVAL_BATCH]))
                    for s in range(0, len(ys), EVAL_BATCH))
        images, labels = tf.constant(self.test[0]), tf.constant(self.test[1])
        mine = tf.data.Dataset.range(worker_index, len(self.test[1]), num_workers)
        return (mine.map(lambda at: (self.load(images[at]), labels[at]), num_parallel_calls=self.workers or None,
                         deterministic=True).batch(EVAL_BATCH).prefetch(tf.data.AUTOTUNE))


def train_dataset(strategy, source: InputSource, seed: int, global_batch: int, steps_per_epoch: int, epochs: range):
    """The batches of `epochs`; each epoch's order is drawn from (seed, epoch) alone, so that a resumed run
    reads on exactly where the run it continues stopped."""
    def per_worker(ctx: "tf.distribute.InputContext"):
        mine = tf.range(ctx.input_pipeline_id, source.train_count, ctx.num_input_pipelines)  # this pipeline's shard
        per_replica = ctx.get_per_replica_batch_size(global_batch)
        batches_per_epoch = steps_per_epoch * (ctx.num_replicas_in_sync // ctx.num_input_pipelines)

        def epoch(index):
            order = tf.gather(mine, tf.argsort(tf.random.stateless_uniform(tf.shape(mine), seed=[seed, index])))
            return tf.data.Dataset.from_tensor_slices(order).take(batches_per_epoch * per_replica)

        indices = tf.data.Dataset.range(epochs.start, epochs.stop).flat_map(epoch)
        return source.batches(indices, source.train, per_replica).prefetch(tf.data.AUTOTUNE)

    return strategy.distribute_datasets_from_function(per_worker)


def evaluate(eval_batch, sum_across_workers, batches, worker_index: int, train_loss_sum: float, steps: int) -> dict:
    """Exact accuracy: worker w evaluates samples w, w+W, ... (`batches`); the sums are all-reduced."""
    correct = loss = count = 0.0
    for images, labels in batches:
        c, l = eval_batch(images, labels)
        correct, loss, count = correct + float(c), loss + float(l), count + int(labels.shape[0])
    # Each worker's train-loss sum is already the global mean per step: contribute it from worker 0 only.
    own_train = train_loss_sum if worker_index == 0 else 0.0
    totals = sum_across_workers(tf.constant([correct, count, loss, own_train], tf.float64)).numpy()
    correct, count, loss_sum, train_loss_sum = totals.tolist()
    return {"test_accuracy": correct / count, "test_loss": loss_sum / count, "eval_samples": int(count),
            "train_loss": train_loss_sum / max(steps, 1)}


def evaluation_functions(strategy, model, loss_fn, num_workers: int):
    """The evaluation's tf.functions: one test batch's (correct, loss sum), and a sum across workers."""

    @tf.function
    def eval_batch(images, labels):
        logits = model(normalise(images), training=False)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=labels.dtype), labels), tf.float64))
        loss = tf.reduce_sum(tf.cast(loss_fn(labels, tf.cast(logits, tf.float32)), tf.float64))
        return correct, loss

    @tf.function
    def sum_across_workers(values):
        """Sum one vector per worker across all workers (each worker's first replica contributes it)."""
        per_worker = strategy.num_replicas_in_sync // num_workers

        def contribute():
            ctx = tf.distribute.get_replica_context()
            first = tf.equal(ctx.replica_id_in_sync_group % per_worker, 0)
            return tf.where(first, values, tf.zeros_like(values))

        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(contribute), axis=None)

    return eval_batch, sum_across_workers
