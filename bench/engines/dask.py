"""Dask: one rank per `distributed` worker, dispatched with `client.submit(..., workers=[w], pure=False)`.

Written on `distributed` itself rather than dask-pytorch-ddp 0.2.2, which defaults to nccl, fails on
positional arguments, always uses port 23456, and submits pure tasks (a second identical call returns
the cached result without training).
"""
from __future__ import annotations

import dataclasses
import logging
import os
import uuid
from pathlib import Path

from distributed import Client, LocalCluster, as_completed

from bench.engines.api import Group, rank_main
from bench.spec.task import SpecError
from bench.worker.gpus import rotated


def run(group: Group, fn, args: tuple, kwargs: dict, address: str | None, work: Path) -> list:
    cluster = None
    if address is None:
        # Scheduler, nannies and workers on loopback; no dashboard (it would be one more listener).
        cluster = LocalCluster(n_workers=group.world_size, threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None, local_directory=str(work / "dask"),
                               silence_logs=logging.ERROR)
    client = Client(cluster or address)
    try:
        workers = sorted(client.scheduler_info()["workers"])
        if len(workers) < group.world_size:
            raise SpecError(f"the Dask cluster has {len(workers)} workers, the run needs {group.world_size}: "
                            "add workers or lower --devices")
        if address is not None:  # the ranks meet at rank 0's worker, as torchrun's at its master
            group = dataclasses.replace(group, rendezvous=master_of(client, workers[0]),
                                        first_visible_is_own=group.device_type == "cuda" and rotated_visibility(client))
        tag = uuid.uuid4().hex[:8]
        futures = [client.submit(rank_main, group, rank, fn, args, kwargs, workers=[workers[rank]],
                                 allow_other_workers=False, pure=False, key=f"dtbench-{tag}-rank{rank}")
                   for rank in range(group.world_size)]
        for future in as_completed(futures):
            if future.status == "error":
                try:
                    future.result()  # re-raises the rank's error as Dask carried it
                finally:  # the others may be waiting for it in a collective: cancel, don't wait
                    client.cancel([f for f in futures if f is not future], force=True)
        return futures[0].result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()  # stops the worker processes, even one stuck in a collective


def master_of(client: Client, worker: str) -> str:
    """The process group's rendezvous on an existing cluster: `tcp://` at rank 0's worker's host, on a port that
    host had free a moment ago (dask-pytorch-ddp fixes 23456, which a second run or another program may hold)."""
    host = worker.removeprefix("tcp://").rsplit(":", 1)[0]
    port = client.run(free_port, workers=[worker])[worker]
    return f"tcp://{host}:{port}"


def free_port() -> int:
    """Run on the worker: a port free on every interface there (bench.hosts.loopback's is free on loopback only,
    and the other ranks may be on other hosts)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def rotated_visibility(client: Client) -> bool:
    """Whether the cluster's workers see every GPU with their own first (dask-cuda's LocalCUDACluster and
    dask-cuda-worker rotate CUDA_VISIBLE_DEVICES so), in which case each rank trains on its first visible."""
    by_host: dict[str, list[list[str]]] = {}
    for worker, visible in client.run(os.environ.get, "CUDA_VISIBLE_DEVICES").items():
        host = worker.rsplit(":", 1)[0]
        by_host.setdefault(host, []).append([g.strip() for g in (visible or "").split(",") if g.strip()])
    return bool(by_host) and all(rotated(lists) for lists in by_host.values())
