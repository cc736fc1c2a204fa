"""Spark: `pyspark.ml.torch.distributor.TorchDistributor(num_processes=N, local_mode=...).run(fn, ...)`.

No address: a local session and `local_mode=True` (the ranks are torchrun processes beside the driver).
A master URL (`local-cluster[2,1,1024]`, `spark://...`): `local_mode=False`, one barrier task per rank on
the executors. TorchDistributor returns one rank's value, which holds every rank's (all-gathered).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.engines.api import Group, rank_main_from_env
from bench.spec.task import SpecError


def run(group: Group, fn, args: tuple, kwargs: dict, address: str | None, work: Path) -> list:
    # The executors' Python must be this one (with torch); Spark must not bind a LAN address.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.ml.torch.distributor import TorchDistributor
    from pyspark.sql import SparkSession

    master = address or f"local[{group.world_size}]"
    local_mode = master.startswith("local[")
    if group.device_type == "cuda" and master.startswith("local-cluster"):
        # Its workers all start on this host from one environment and would each claim the same GPUs.
        raise SpecError("--spark-master local-cluster[...] cannot share GPUs between its workers: use the default "
                        "local mode (no --spark-master) or a real cluster whose workers discover their own GPUs")
    builder = SparkSession.builder.master(master).appName("dtbench")
    for key, value in session_conf(group, local_mode, work).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        distributor = TorchDistributor(num_processes=group.world_size, local_mode=local_mode,
                                       use_gpu=group.device_type == "cuda")
        return distributor.run(rank_main_from_env, group, fn, args, kwargs)
    finally:
        session.stop()


def session_conf(group: Group, local_mode: bool, work: Path) -> dict[str, str]:
    """The Spark session's settings. On CUDA, the GPU resources TorchDistributor(use_gpu=True) needs
    (without them: "GPUs were unable to be found on the driver"): in local mode the driver owns the
    GPUs, on a cluster each executor owns its node's and each task (rank) one."""
    conf = {
        "spark.ui.enabled": "false",
        "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
        "spark.local.dir": str(work / "spark"),
        "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    if group.device_type != "cuda":
        return conf
    if local_mode:
        return {**conf, "spark.driver.resource.gpu.amount": str(group.world_size),
                "spark.driver.resource.gpu.discoveryScript": write_discovery_script(work)}
    # A cluster's workers discover their own GPUs (their discovery script is the cluster's, on their hosts);
    # the application asks each executor for its node's and each task (rank) for one.
    return {**conf, "spark.executor.resource.gpu.amount": str(group.per_node), "spark.task.resource.gpu.amount": "1"}


# Spark runs it to learn the GPUs its process may use. Addresses index CUDA_VISIBLE_DEVICES when that is
# set (Spark maps them back through it: pyspark.ml.torch.distributor._get_gpus_owned), else nvidia-smi's.
DISCOVERY_SCRIPT = """\
import json, os, subprocess
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
if visible is not None:
    count = len([g for g in visible.split(",") if g.strip() and g.strip() != "-1"])
    addresses = [str(i) for i in range(count)]
else:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=index", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout
    except OSError:
        out = ""
    addresses = [line.strip() for line in out.splitlines() if line.strip()]
print(json.dumps({"name": "gpu", "addresses": addresses}))
"""


def write_discovery_script(work: Path) -> str:
    path = work / "gpu_discovery.py"
    path.write_text(f"#!{sys.executable}\n{DISCOVERY_SCRIPT}")
    path.chmod(0o755)
    return str(path)
