"""Ray: Ray Train's `TorchTrainer` with `ScalingConfig(num_workers=N, use_gpu=...)`.

On this host the process group meets through our `file://` store rather than Ray's TCP rendezvous
(a TCPStore that listens on every interface): `LoopbackTorchConfig` keeps TorchTrainer and swaps the
backend that sets the group up. Rank 0 hands every rank's value back in a checkpoint: Ray Train V2
returns no metrics unless rank 0 also reports a checkpoint.
"""
from __future__ import annotations

import contextlib
import os
import pickle
import secrets
import shutil
import tempfile
from pathlib import Path

import psutil

from bench.engines.api import Group, rank_main

VALUES_FILE = "values.pkl"


def _train_loop(config: dict) -> None:
    import ray.train

    group = config["group"]
    rank = ray.train.get_context().get_world_rank()
    # The GPU Ray gave this worker (its workers on a node all see the node's GPUs they were given).
    own_gpu = str(ray.get_gpu_ids()[0]) if group.device_type == "cuda" and ray.get_gpu_ids() else None
    values = rank_main(group, rank, config["fn"], config["args"], config["kwargs"], own_gpu=own_gpu)
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if rank == 0:
            Path(folder, VALUES_FILE).write_bytes(pickle.dumps(values))
            checkpoint = ray.train.Checkpoint.from_directory(folder)
        ray.train.report({"rank": rank}, checkpoint=checkpoint)


def _loopback_config(backend: str):
    from ray.train.backend import Backend
    from ray.train.torch import TorchConfig

    class FileStoreBackend(Backend):
        """The ranks join the group themselves (rank_main, file:// store) and leave it themselves."""
        share_cuda_visible_devices = True

    class LoopbackTorchConfig(TorchConfig):
        @property
        def backend_cls(self):
            return FileStoreBackend

    return LoopbackTorchConfig(backend=backend)


def run(group: Group, fn, args: tuple, kwargs: dict, address: str | None, work: Path) -> list:
    import ray
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    # Ray's own listeners on loopback; its session files in a short folder of ours (unix socket paths
    # are limited to 107 bytes, too short for a run directory), not in the user's home.
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    temp = Path(tempfile.mkdtemp(prefix="dtray-", dir="/tmp"))  # not TMPDIR: the run's own, removed after it
    started = not ray.is_initialized()
    ours_before = {child.pid for child in psutil.Process().children(recursive=True)}  # not the cluster's
    if started:
        if address is None:
            # The cluster's token lives with it, not in ~/.ray/auth_token.
            token = temp / "auth_token"
            token.write_text(secrets.token_hex(32))
            token.chmod(0o600)
            os.environ["RAY_AUTH_TOKEN_PATH"] = str(token)
            ray.init(num_cpus=max(group.world_size, os.cpu_count() or 1), include_dashboard=False,
                     _node_ip_address="127.0.0.1", _temp_dir=str(temp), log_to_driver=False,
                     configure_logging=False)
        else:
            ray.init(address=address, log_to_driver=False)
    try:
        torch_config = _loopback_config(group.backend) if group.rendezvous else TorchConfig(backend=group.backend)
        trainer = TorchTrainer(
            _train_loop, train_loop_config={"group": group, "fn": fn, "args": args, "kwargs": kwargs},
            torch_config=torch_config,
            scaling_config=ScalingConfig(num_workers=group.world_size, use_gpu=group.device_type == "cuda"),
            run_config=RunConfig(storage_path=str(work / "ray_results"), name="dtbench"))
        result = trainer.fit()
        if result.error:
            raise result.error
        with result.checkpoint.as_directory() as folder:
            return pickle.loads(Path(folder, VALUES_FILE).read_bytes())
    finally:
        if started:
            cluster = [c for c in psutil.Process().children(recursive=True) if c.pid not in ours_before]
            ray.shutdown()
            if address is None:
                end(cluster)
        shutil.rmtree(temp, ignore_errors=True)


def end(processes: list, within_s: float = 10.0) -> None:
    """The local cluster's processes (its GCS, raylet and workers) gone before the call returns: `ray.shutdown`
    signals them but does not wait, and a worker still exiting would outlive the call. Killed after `within_s`."""
    _, alive = psutil.wait_procs(processes, timeout=within_s)
    for process in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(alive, timeout=within_s)
