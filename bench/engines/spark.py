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


def run(group: Group, fn, args: tuple, kwargs: dict, address: str | None, work: Path) -> list:
    # The executors' Python must be this one (with torch); Spark must not bind a LAN address.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.ml.torch.distributor import TorchDistributor
    from pyspark.sql import SparkSession

    master = address or f"local[{group.world_size}]"
    local_mode = master.startswith("local[")
    builder = (SparkSession.builder.master(master).appName("dtbench")
               .config("spark.ui.enabled", "false")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.local.dir", str(work / "spark"))
               .config("spark.executorEnv.PYTHONPATH", os.environ.get("PYTHONPATH", "")))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        distributor = TorchDistributor(num_processes=group.world_size, local_mode=local_mode,
                                       use_gpu=group.device_type == "cuda")
        return distributor.run(rank_main_from_env, group, fn, args, kwargs)
    finally:
        session.stop()
