"""One JAX rank, whichever the variant: pin the process, give XLA its devices (on a CPU, the mesh variant's N host
devices: XLA reads XLA_FLAGS when JAX starts, so before the import), join the other processes where there are any
(jax.distributed), report the world it joined and train (jax_impl/train.py)."""
from __future__ import annotations

import os

from bench.worker import Worker, exit_now, spec_path_from_argv

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"
# XLA:CPU ends the process when a device's thread reaches an all-reduce more than 40 s before its peer does (its
# default): on an oversubscribed CPU (two vCPUs, other runs beside) one host device's thread fell that far behind
# and the rank died of signal 6. A late peer there is slow, not lost: wait up to ten minutes.
COLLECTIVE_TIMEOUT_FLAG = "--xla_cpu_collective_call_terminate_timeout_seconds=600"


def main(kind: str) -> None:
    """kind: "single" (one device), "mesh" (the node's devices, one process), "distributed" (one process each)."""
    worker = Worker(spec_path_from_argv())
    with worker.session():
        threads = worker.pin()
        if worker.device_type == "cpu":
            host_devices = worker.spec.devices_per_node if kind == "mesh" else 1
            flags = [HOST_DEVICES_FLAG + f"={host_devices}"] + ([COLLECTIVE_TIMEOUT_FLAG] if host_devices > 1 else [])
            os.environ["XLA_FLAGS"] = " ".join([os.environ.get("XLA_FLAGS", ""), *flags]).strip()
        import jax

        if kind == "distributed":
            from jax_impl.launch import COORDINATOR_ENV

            jax.config.update("jax_cpu_collectives_implementation", "gloo")
            jax.distributed.initialize(os.environ[COORDINATOR_ENV], num_processes=int(os.environ["WORLD_SIZE"]),
                                       process_id=int(os.environ["RANK"]))
        from jax_impl.train import train

        devices = jax.devices()
        worker.joined(len(devices), framework_version=jax.__version__, device=devices[0].platform,
                      device_name=devices[0].device_kind, threads=threads,
                      backend="gloo" if kind == "distributed" and worker.device_type == "cpu" else
                      "nccl" if kind == "distributed" else "none",
                      processes=jax.process_count(), local_devices=jax.local_device_count())
        train(worker)
    if kind == "distributed":
        exit_now(0)  # the coordinator service's shutdown waits on peers that may already be gone
