"""Every strategy the TensorFlow variants train under, made in one place (as tensorflow/models'
`distribute_utils.get_distribution_strategy` does), with what the rank reports when it joins:

- "default": TensorFlow's default (no-op) strategy on one device: tf-single, the baseline.
- "mirrored": MirroredStrategy, one process over its node's devices: every visible GPU, or on a CPU-only
  machine N logical CPU devices (tf_impl/configure.py made them), so that it really runs N replicas.
- "multiworker": MultiWorkerMirroredStrategy, one process per worker configured by TF_CONFIG (a loopback
  cluster, or across hosts); collectives over NCCL on GPUs, ring on CPUs.
- "parameter_server": ParameterServerStrategy from TF_CONFIG, on the chief, with its ClusterCoordinator.

Import after `configure` (it imports TensorFlow).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import tensorflow as tf

from bench.spec import knobs
from bench.worker import Worker, cpu_model
from tf_impl import kernels
from tf_impl.keras_flavour import FLAVOUR
from tf_impl.knobs import MIRRORED, MULTIWORKER

KINDS = ("default", "mirrored", "multiworker", "parameter_server")


@dataclass
class Made:
    strategy: tf.distribute.Strategy
    world_size: int                       # what the rank reports it joined: replicas, or tf-ps's workers
    joined: dict = field(default_factory=dict)  # the rest of its `joined` record
    num_workers: int = 1
    worker_index: int = 0
    coordinator: object | None = None     # tf-ps: the chief's ClusterCoordinator


def make(kind: str, worker: Worker, tf_config: dict | None = None) -> Made:
    if kind == "default":
        strategy = tf.distribute.get_strategy()  # no replication, no all-reduce
        return Made(strategy, strategy.num_replicas_in_sync, {"backend": "none", **device_info(strategy)})
    if kind == "mirrored":
        devices = [d.name for d in tf.config.list_logical_devices("GPU" if worker.device_type == "cuda" else "CPU")]
        ops = cross_device_ops(knobs.values(MIRRORED, worker.task.options.knobs)["cross_device_ops"])
        strategy = tf.distribute.MirroredStrategy(devices=devices, cross_device_ops=ops)
        return Made(strategy, strategy.num_replicas_in_sync,
                    {"backend": type(strategy.extended._cross_device_ops).__name__, **device_info(strategy)})
    workers = len(tf_config["cluster"]["worker"])
    if kind == "multiworker":
        options = communication_options(worker.device_type, knobs.values(MULTIWORKER, worker.task.options.knobs))
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        return Made(strategy, strategy.num_replicas_in_sync,
                    {"backend": f"collective {options.implementation.name.lower()}", "workers": workers,
                     **device_info(strategy)}, num_workers=workers, worker_index=tf_config["task"]["index"])
    if kind == "parameter_server":
        strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
        return Made(strategy, workers,
                    {"backend": "parameter servers over gRPC, asynchronous updates", "workers": workers,
                     "parameter_servers": len(tf_config["cluster"]["ps"]), "framework_version": tf.__version__,
                     "keras": FLAVOUR, "threads": tf.config.threading.get_intra_op_parallelism_threads(),
                     "kernels": kernels.report(),
                     "device_name": cpu_model() if worker.device_type == "cpu" else None},
                    num_workers=workers, coordinator=tf.distribute.coordinator.ClusterCoordinator(strategy))
    raise ValueError(f"unknown strategy {kind!r}: one of {', '.join(KINDS)}")


def cross_device_ops(name: str | None) -> tf.distribute.CrossDeviceOps | None:
    """MirroredStrategy's way of summing the replicas' gradients, as the run's knob names it (None: TensorFlow's
    choice for the devices)."""
    made = {"reduction_to_one_device": tf.distribute.ReductionToOneDevice,
            "hierarchical_copy": tf.distribute.HierarchicalCopyAllReduce, "nccl": tf.distribute.NcclAllReduce}
    return made[name]() if name else None


def communication_options(device_type: str, tuned: dict) -> tf.distribute.experimental.CommunicationOptions:
    """MultiWorkerMirroredStrategy's collectives with the run's knobs (tf_impl/knobs.py): NCCL on GPUs, ring on
    CPUs unless --set implementation=...; the gradients packed as TensorFlow packs them unless bytes_per_pack."""
    collective = tf.distribute.experimental.CommunicationImplementation
    name = tuned["implementation"] or ("nccl" if device_type == "cuda" else "ring")
    return tf.distribute.experimental.CommunicationOptions(bytes_per_pack=tuned["bytes_per_pack"],
                                                           implementation=getattr(collective, name.upper()))


def device_info(strategy: tf.distribute.Strategy) -> dict:
    """What the row records about the framework and the devices this process trains on."""
    info = {"framework_version": tf.__version__, "keras": FLAVOUR, "kernels": kernels.report(),
            "threads": tf.config.threading.get_intra_op_parallelism_threads(),
            "replicas": strategy.num_replicas_in_sync, "devices": _replica_devices(strategy)}
    build = tf.sysconfig.get_build_info()
    names = [tf.config.experimental.get_device_details(g).get("device_name", g.name)
             for g in tf.config.list_physical_devices("GPU")]
    info.update(tf_cuda_build=build.get("cuda_version"), tf_cudnn_build=build.get("cudnn_version"), gpus_seen=names)
    if names:
        info.update(device_name=names[0], cuda=build.get("cuda_version"), cudnn=build.get("cudnn_version"))
    else:
        info.update(device_name=cpu_model())
    return info


def _replica_devices(strategy: tf.distribute.Strategy) -> list[str]:
    try:
        return list(strategy.extended.worker_devices)
    except RuntimeError:  # the default strategy has no device list: it runs where TF places ops
        return ["default"]
