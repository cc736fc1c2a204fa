"""tf-multiworker: MultiWorkerMirroredStrategy, one process per worker configured by TF_CONFIG.

The harness gives each worker its TF_CONFIG (a loopback cluster, its task
index). Per device slot (the default) every worker drives one device; per node
one worker mirrors over its node's GPUs. Collectives: NCCL on GPUs, ring on CPU.
"""
from __future__ import annotations

import json
import os

from bench.worker import Worker, exit_now, spec_path_from_argv
from tf_impl import train


def main(fit: bool = False) -> None:
    """Train with the custom loop, or with `model.fit` (tf-multiworker-fit)."""
    worker = Worker(spec_path_from_argv())
    with worker.session():
        tf = train.configure(worker)
        config = json.loads(os.environ["TF_CONFIG"])
        implementation = (tf.distribute.experimental.CommunicationImplementation.NCCL
                          if worker.device_type == "cuda" else tf.distribute.experimental.CommunicationImplementation.RING)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(
            communication_options=tf.distribute.experimental.CommunicationOptions(implementation=implementation))
        num_workers = len(config["cluster"]["worker"])
        worker.joined(strategy.num_replicas_in_sync, backend=f"collective {implementation.name.lower()}",
                      workers=num_workers, **train.device_info(strategy))
        if fit:
            from tf_impl.fit import train_with_fit as loop  # imports Keras: once configure() has pinned the process
        else:
            loop = train.train
        loop(worker, strategy, num_workers=num_workers, worker_index=config["task"]["index"])
    # TF's gRPC server cannot be shut down cleanly and would keep the process alive.
    exit_now(0)


if __name__ == "__main__":
    main()
