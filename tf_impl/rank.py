"""One TensorFlow rank, whichever the variant: pin and configure TensorFlow (tf_impl/configure.py), make the
variant's strategy (tf_impl/strategies.py), report the world it joined, train with the custom loop
(tf_impl/train.py), `model.fit` (tf_impl/fit.py) or, on tf-ps's chief, the coordinator's loop
(tf_impl/ps_loop.py). A tf-ps worker or parameter server serves the chief until the harness ends the run.
"""
from __future__ import annotations

import json
import os

from bench.worker import Worker, exit_now, spec_path_from_argv
from tf_impl.configure import configure


def main(kind: str, fit: bool = False) -> None:
    worker = Worker(spec_path_from_argv())
    tf_config = json.loads(os.environ["TF_CONFIG"]) if "TF_CONFIG" in os.environ else None
    role = tf_config["task"]["type"] if tf_config else "worker"
    with worker.session():
        configure(worker, logical_cpus=worker.spec.devices_per_node if kind == "mirrored" else 1,
                  # tf-ps's chief and parameter servers train on no GPU of their own
                  trains_on_gpus=kind != "parameter_server" or role == "worker")
        # Imported now that TensorFlow's pools are sized: each imports TensorFlow (and Keras) at its top.
        from tf_impl import strategies

        if kind == "parameter_server":
            from tf_impl import ps_loop

            if role != "chief":
                ps_loop.serve(worker, tf_config)
        made = strategies.make(kind, worker, tf_config)
        worker.joined(made.world_size, **made.joined)
        if kind == "parameter_server":
            ps_loop.train_async(worker, made.strategy, made.coordinator, made.num_workers)
        elif fit:
            from tf_impl.fit import train_with_fit

            train_with_fit(worker, made.strategy, num_workers=made.num_workers, worker_index=made.worker_index)
        else:
            from tf_impl.train import train

            train(worker, made.strategy, num_workers=made.num_workers, worker_index=made.worker_index)
    if tf_config is not None:
        exit_now(0)  # TF's gRPC servers cannot be shut down cleanly and would keep the process alive
