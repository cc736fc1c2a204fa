"""A TensorFlow rank's first step, before any other module of tf_impl is imported: pin the process, then import
TensorFlow with its thread pools sized to the slot, N logical CPU devices for a mirrored run on a CPU, and the
run's precision policy; on CUDA, the GPUs the harness gave it or a one-line failure.

TensorFlow sizes its pools when it starts, so this module imports it inside `configure`; every other module
(the strategies, the loops, the model, the recipe) imports it at its top and is imported after (tf_impl/rank.py).
"""
from __future__ import annotations

import os
import sys

from bench.worker import Worker
from bench.worker.gpus import gpus_not_seen


class GPUsNotSeen(RuntimeError):
    pass


def configure(worker: Worker, logical_cpus: int = 1, trains_on_gpus: bool = True):
    """Import TensorFlow with thread pools sized to this process's cores; return the module. A process that
    trains on no GPU of its own (tf-ps's chief and parameter servers) passes `trains_on_gpus=False`."""
    # tf.data decodes files on its own threads: the compute pool keeps the slot's size. (Shrunk, TensorFlow's
    # reductions split differently and training drifted from the in-memory run's by 0.9 points here.)
    threads = worker.pin(loader_processes=False)
    import tensorflow as tf

    from tf_impl.keras_flavour import keras  # Keras 3, or Keras 2 where the variant's launch asks for it

    tf.config.threading.set_intra_op_parallelism_threads(threads)
    # A process of a TensorFlow cluster (TF_CONFIG: tf-multiworker, tf-ps's chief, workers and parameter servers)
    # has peers even at one device.
    peers = worker.spec.world_size > 1 or "TF_CONFIG" in os.environ
    tf.config.threading.set_inter_op_parallelism_threads(inter_op_threads(threads, peers, logical_cpus))
    if worker.device_type == "cpu" and logical_cpus > 1:
        [cpu] = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * logical_cpus)
    if worker.device_type == "cuda" and trains_on_gpus:
        require_gpus(worker, tf)
        if worker.task.options.device_memory_gib:  # --device-memory: TensorFlow's own cap, one logical device per GPU
            limit = tf.config.LogicalDeviceConfiguration(memory_limit=int(worker.task.options.device_memory_gib * 1024))
            for gpu in tf.config.list_physical_devices("GPU"):
                tf.config.set_logical_device_configuration(gpu, [limit])
    precision = worker.task.recipe.precision
    if precision != "fp32":
        keras.mixed_precision.set_global_policy({"bf16": "mixed_bfloat16", "fp16": "mixed_float16"}[precision])
    return tf


def inter_op_threads(threads: int, peers: bool, logical_cpus: int) -> int:
    """The inter-op pool: the slot's cores, as TensorFlow sizes it by itself in a pinned process. A rank with peers
    (other processes of its cluster, or several replicas in this process) gets at least 2: a collective or a
    parameter server's RPC blocks its inter-op thread until the others answer, and with one thread nothing else
    runs meanwhile (tf-ps hangs). A second thread on a one-core slot cost tf-single 5-14 % on EfficientNet-B0
    (results/overhead-cpu), so a rank with no peer never has one."""
    return max(2, threads) if peers or logical_cpus > 1 else threads


def require_gpus(worker: Worker, tf) -> None:
    """Asked for CUDA, train on the GPUs the harness gave this process or not at all: never on the CPU
    beside PyTorch rows on GPUs (tensorflow-cpu, or a build that cannot find its CUDA libraries)."""
    given = [g for g in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if g.strip()]
    seen = tf.config.list_physical_devices("GPU")
    if len(seen) < max(1, len(given)):
        build = tf.sysconfig.get_build_info()
        raise GPUsNotSeen(gpus_not_seen(worker.spec.variant, given, len(seen), f"TensorFlow {tf.__version__}",
                                        build.get("cuda_version") if build.get("is_cuda_build") else None,
                                        sys.executable))
