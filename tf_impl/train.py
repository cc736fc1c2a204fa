"""The training loop both TensorFlow variants share: a custom loop under a tf.distribute strategy.

Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy (keras-team/keras#20585), so
both variants use the same custom loop: `strategy.run` inside a `tf.function`, the loss averaged
over the global batch with `tf.nn.compute_average_loss`. Same SGD, learning rate, seed policy and
on-device normalisation as the PyTorch variants.
"""
from __future__ import annotations


import numpy as np

from bench import data as cache
from bench.worker import Worker, cpu_model, peak_rss_mb

# Imported after the worker has pinned itself and sized TF's pools (see configure()).
tf = None
keras = None
EVAL_BATCH = cache.EVAL_BATCH


def configure(worker: Worker, logical_cpus: int = 1):
    """Import TensorFlow with thread pools sized to this process's cores; return the module."""
    global tf, keras
    threads = worker.pin()
    import tensorflow
    import keras as keras_module

    tf, keras = tensorflow, keras_module
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    # Collectives need an inter-op thread of their own beside the compute.
    tf.config.threading.set_inter_op_parallelism_threads(max(2, threads))
    if worker.device_type == "cpu" and logical_cpus > 1:
        [cpu] = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus)
    precision = worker.task["precision"]
    if precision != "fp32":
        keras.mixed_precision.set_global_policy({"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[precision])
    return tf


def device_info(strategy) -> dict:
    info = {"framework_version": tf.__version__, "keras": keras.__version__,
            "threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "replicas": strategy.num_replicas_in_sync, "devices": _replica_devices(strategy)}
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        info.update(device_name=details.get("device_name", "GPU"), cuda=tf.sysconfig.get_build_info().get("cuda_version"),
                    cudnn=tf.sysconfig.get_build_info().get("cudnn_version"))
    else:
        info.update(device_name=cpu_model())
    return info


def _replica_devices(strategy) -> list[str]:
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no device list: it runs where TF places ops
        return ["default"]


def normalise(images):
    return (tf.cast(images, tf.float32) / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD


class Trainer:
    def __init__(self, worker: Worker, strategy, num_workers: int, worker_index: int):
        # Imports keras, so only here: after configure() has pinned this process and sized its pools.
        from tf_impl.model import build_model, count_parameters

        self.worker, self.task, self.strategy = worker, worker.task, strategy
        self.num_workers, self.worker_index = num_workers, worker_index
        self.global_batch = self.task["global_batch"]
        with strategy.scope():
            self.model = build_model(self.task)
            self.params = count_parameters(self.model)
            optimizer = keras.optimizers.SGD(learning_rate=self.task["lr"], momentum=self.task["momentum"],
                                             weight_decay=self.task["weight_decay"] or None)
            if self.task["precision"] == "fp16":
                optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
            # Build the slots (momentum) here, under the scope: built lazily inside strategy.run,
            # Keras 3's SGD with momentum fails under MirroredStrategy ("must feed a value for placeholder").
            optimizer.build(self.model.trainable_variables)
            self.optimizer = optimizer
            self.loss_fn = keras.losses.SparseCategoricalCrossentropy(
                from_logits=True, reduction=None)
        self._last = None
        self._train_step = tf.function(self._distributed_step)
        self._sum_workers = tf.function(self._sum_across_workers)
        self._eval_batch = tf.function(self._eval_step)

    # ------------------------------------------------------------ one step
    def _replica_step(self, images, labels):
        with tf.GradientTape() as tape:
            logits = self.model(normalise(images), training=True)
            loss = tf.nn.compute_average_loss(self.loss_fn(labels, logits), global_batch_size=self.global_batch)
            scaled = self.optimizer.scale_loss(loss) if self.task["precision"] == "fp16" else loss
        grads = tape.gradient(scaled, self.model.trainable_variables)
        self.optimizer.apply_gradients(zip(grads, self.model.trainable_variables))
        return loss

    def _distributed_step(self, iterator):
        # next() inside the tf.function: the distributed iterator's eager path fails on logical CPUs.
        per_replica = self.strategy.run(self._replica_step, args=next(iterator))
        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def sync(self) -> None:
        """Fetch the last step's loss: it exists only once the step (and its all-reduce) has run."""
        if self._last is not None:
            self._last.numpy()

    # ------------------------------------------------------------ input
    def _train_dataset(self, train_x: np.ndarray, train_y: np.ndarray):
        seed, global_batch = self.task["seed"], self.global_batch

        def per_worker(ctx: "tf.distribute.InputContext"):
            ds = tf.data.Dataset.from_tensor_slices((train_x, train_y))
            ds = ds.shard(ctx.num_input_pipelines, ctx.input_pipeline_id)
            ds = ds.shuffle(len(train_y) // ctx.num_input_pipelines + 1, seed=seed, reshuffle_each_iteration=True)
            ds = ds.repeat().batch(ctx.get_per_replica_batch_size(global_batch), drop_remainder=True)
            return ds.prefetch(tf.data.AUTOTUNE)

        return self.strategy.distribute_datasets_from_function(per_worker)

    # ------------------------------------------------------------ evaluation
    def _eval_step(self, images, labels):
        logits = self.model(normalise(images), training=False)
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1, output_type=labels.dtype), labels), tf.float64))
        loss = tf.reduce_sum(tf.cast(self.loss_fn(labels, tf.cast(logits, tf.float32)), tf.float64))
        return correct, loss

    def _sum_across_workers(self, values):
        """Sum one vector per worker across all workers (each worker's first replica contributes it)."""
        per_worker = self.strategy.num_replicas_in_sync // self.num_workers

        def contribute():
            ctx = tf.distribute.get_replica_context()
            first = tf.equal(ctx.replica_id_in_sync_group % per_worker, 0)
            return tf.where(first, values, tf.zeros_like(values))

        return self.strategy.reduce(tf.distribute.ReduceOp.SUM, self.strategy.run(contribute), axis=None)

    def evaluate(self, test_x: np.ndarray, test_y: np.ndarray, train_loss_sum: float, steps: int) -> dict:
        """Exact accuracy: worker w evaluates samples w, w+W, ...; the sums are all-reduced."""
        xs, ys = test_x[self.worker_index::self.num_workers], test_y[self.worker_index::self.num_workers]
        correct = loss = 0.0
        for start in range(0, len(ys), EVAL_BATCH):
            c, l = self._eval_batch(tf.constant(xs[start:start + EVAL_BATCH]), tf.constant(ys[start:start + EVAL_BATCH]))
            correct, loss = correct + float(c), loss + float(l)
        # Each worker's train-loss sum is already the global mean per step: contribute it from worker 0 only.
        own_train = train_loss_sum if self.worker_index == 0 else 0.0
        totals = self._sum_workers(tf.constant([correct, len(ys), loss, own_train], tf.float64)).numpy()
        correct, count, loss_sum, train_loss_sum = totals.tolist()
        return {"test_accuracy": correct / count, "test_loss": loss_sum / count, "eval_samples": int(count),
                "train_loss": train_loss_sum / max(steps, 1)}

    # ------------------------------------------------------------ the run
    def fit(self) -> dict:
        task, worker = self.task, self.worker
        if task["dataset"] == "synthetic":
            rng = np.random.default_rng(task["seed"])
            side, ch = task["image_size"], task["channels"]
            train_x = rng.integers(0, 256, (self.global_batch, side, side, ch), dtype=np.uint8)
            train_y = rng.integers(0, task["classes"], self.global_batch).astype(np.int64)
            test = None
            steps_per_epoch, epochs = worker.timed_steps, 1
        else:
            arrays = cache.load(worker.spec["data_path"], mmap=False)
            train_x, train_y = arrays["train_x"], arrays["train_y"]
            test = (arrays["test_x"], arrays["test_y"])
            steps_per_epoch, epochs = len(train_y) // self.global_batch, task["epochs"]
        batches = iter(self._train_dataset(train_x, train_y))
        clock = worker.clock(self.global_batch, self.sync)

        def run_epoch(epoch: int) -> None:
            self._losses = []
            for _ in range(steps_per_epoch):
                self._last = self._train_step(batches)
                self._losses.append(self._last)
                clock.step_done()

        def evaluate() -> dict:
            train_loss_sum = float(tf.add_n(self._losses).numpy())
            return self.evaluate(*test, train_loss_sum, len(self._losses))

        return worker.train(clock, epochs, steps_per_epoch, run_epoch, evaluate if test is not None else None,
                            self._peak_memory_mb, self.params)

    def _peak_memory_mb(self) -> float:
        gpus = tf.config.list_logical_devices("GPU")
        if gpus:
            return max(tf.config.experimental.get_memory_info(g.name)["peak"] for g in gpus) / 2**20
        return peak_rss_mb()
