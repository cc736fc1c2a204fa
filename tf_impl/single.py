"""tf-single: the TensorFlow loop under TensorFlow's default (no-op) strategy on one device: the baseline."""
from __future__ import annotations

from bench.worker import Worker, spec_path_from_argv
from tf_impl import train


def main() -> None:
    worker = Worker(spec_path_from_argv())
    with worker.session():
        tf = train.configure(worker)
        strategy = tf.distribute.get_strategy()  # the default strategy: no replication, no all-reduce
        worker.joined(strategy.num_replicas_in_sync, backend="none", **train.device_info(strategy))
        train.train(worker, strategy)


if __name__ == "__main__":
    main()
