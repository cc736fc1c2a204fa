"""tf-mirrored: MirroredStrategy, one process over its node's devices.

On GPUs it mirrors over every visible GPU; on a CPU-only machine over N logical
CPU devices, so that it really runs N replicas (and the row checks it does).
"""
from __future__ import annotations

from bench.worker import Worker, spec_path_from_argv
from tf_impl import train


def main(fit: bool = False) -> None:
    """Train with the custom loop, or with `model.fit` (tf-mirrored-fit)."""
    worker = Worker(spec_path_from_argv())
    with worker.session():
        tf = train.configure(worker, logical_cpus=worker.spec["devices_per_node"])
        if worker.device_type == "cuda":
            devices = [d.name for d in tf.config.list_logical_devices("GPU")]
        else:
            devices = [d.name for d in tf.config.list_logical_devices("CPU")]
        strategy = tf.distribute.MirroredStrategy(devices=devices)
        worker.joined(strategy.num_replicas_in_sync, backend=type(strategy.extended._cross_device_ops).__name__,
                      **train.device_info(strategy))
        if fit:
            from tf_impl.fit import train_with_fit  # imports Keras: only once configure() has pinned the process
            train_with_fit(worker, strategy)
        else:
            train.train(worker, strategy)


if __name__ == "__main__":
    main()
