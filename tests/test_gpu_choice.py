"""Which GPU each rank trains on, under every launcher and engine, and what Spark is told about GPUs —
asserted on CPU from the same functions the ranks and the engines call."""
import json
import os
import subprocess

import pytest

from bench.engines.api import Group, choose_gpu
from bench.spec.task import SpecError
from bench.worker.gpus import GPUChoiceError, cuda_index, rotated, visible_gpus


def test_torchrun_rank_takes_the_gpu_at_its_local_rank():
    assert cuda_index(["4", "5", "6", "7"], local_rank=2) == 2


def test_a_rank_that_sees_one_gpu_trains_on_cuda_0_whatever_its_local_rank():
    # Spark on a cluster, dask-cuda with one GPU a worker: LOCAL_RANK may be 3, the device is cuda:0.
    assert cuda_index(["6"], local_rank=3) == 0


def test_the_gpu_an_engine_gave_is_found_in_what_the_rank_sees():
    assert cuda_index(["2", "3", "5"], local_rank=0, own="5") == 2
    with pytest.raises(GPUChoiceError, match="GPU 7, which it cannot see"):
        cuda_index(["2", "3"], local_rank=0, own="7")


def test_no_gpu_or_too_few_is_an_error_naming_what_was_seen():
    with pytest.raises(GPUChoiceError, match="sees no GPU"):
        cuda_index([], local_rank=0)
    with pytest.raises(GPUChoiceError, match=r"LOCAL_RANK=2 sees 2 GPUs \(0,1\)"):
        cuda_index(["0", "1"], local_rank=2)


def test_visibility_unset_means_every_device_by_index():
    assert visible_gpus(None, 3) == ["0", "1", "2"]
    assert visible_gpus("3, 1", 2) == ["3", "1"]


def test_dask_cuda_rotation_is_recognised_and_plain_sharing_is_not():
    assert rotated([["0", "1", "2", "3"], ["1", "2", "3", "0"], ["2", "3", "0", "1"], ["3", "0", "1", "2"]])
    assert not rotated([["0", "1"], ["0", "1"]])  # every worker sees the same list: LOCAL_RANK decides
    assert not rotated([["0"], ["1"]])             # one GPU each: nothing to rotate


def test_rotated_visibility_puts_every_rank_on_its_first_gpu(monkeypatch):
    group = Group(4, 1, "cuda", None, 60.0, first_visible_is_own=True)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3,0,1")
    assert choose_gpu(group, node=0, local_rank=1, own_gpu=None, device_count=lambda: 4) == 0


def test_fake_nodes_under_an_engine_each_see_their_own_nodes_gpus(monkeypatch):
    # GPUS=8 NODES=2 through Dask or Spark on one box: the driver sees all eight; rank 5 is node 1's local rank 1.
    group = Group(8, 2, "cuda", "file:///x", 60.0, node_gpus=(("0", "1", "2", "3"), ("4", "5", "6", "7")))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7")
    assert choose_gpu(group, node=1, local_rank=1, own_gpu=None, device_count=lambda: 4) == 1
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"


def test_ray_names_the_gpu_and_visibility_is_left_as_ray_set_it(monkeypatch):
    group = Group(2, 1, "cuda", "file:///x", 60.0, node_gpus=(("0", "1"),))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1,0")
    assert choose_gpu(group, node=0, local_rank=0, own_gpu="0", device_count=lambda: 2) == 1
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "1,0"


def spark_conf(tmp_path, local_mode, world=4, nodes=1):
    pytest.importorskip("pyspark", reason="needs the spark extra")
    from bench.engines.spark import session_conf

    return session_conf(Group(world, nodes, "cuda", None, 60.0), local_mode, tmp_path)


def test_spark_local_mode_gives_the_driver_the_slots_gpus(tmp_path):
    conf = spark_conf(tmp_path, local_mode=True)
    assert conf["spark.driver.resource.gpu.amount"] == "4"
    assert os.access(conf["spark.driver.resource.gpu.discoveryScript"], os.X_OK)
    assert not any(key.startswith("spark.executor.resource") for key in conf)


def test_spark_cluster_mode_gives_each_executor_its_nodes_gpus_and_each_task_one(tmp_path):
    conf = spark_conf(tmp_path, local_mode=False, world=8, nodes=2)
    assert conf["spark.executor.resource.gpu.amount"] == "4"
    assert conf["spark.task.resource.gpu.amount"] == "1"
    assert not any("discoveryScript" in key for key in conf)  # the cluster's workers discover their own


def test_spark_local_cluster_with_gpus_is_refused(tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra")
    from bench.engines import spark

    with pytest.raises(SpecError, match="cannot share GPUs between its workers"):
        spark.run(Group(2, 1, "cuda", None, 60.0), print, (), {}, "local-cluster[2,1,1024]", tmp_path)


def test_spark_on_cpu_asks_for_no_gpu(tmp_path):
    pytest.importorskip("pyspark", reason="needs the spark extra")
    from bench.engines.spark import session_conf

    assert not any("gpu" in key for key in session_conf(Group(2, 1, "cpu", None, 60.0), True, tmp_path))


@pytest.mark.parametrize("visible, addresses", [("4,5", ["0", "1"]), ("7", ["0"]), ("", [])])
def test_discovery_script_reports_exactly_the_gpus_its_process_may_use(tmp_path, visible, addresses):
    # Spark maps these addresses back through CUDA_VISIBLE_DEVICES (4,5 -> "0","1" -> GPUs 4 and 5).
    script = spark_conf(tmp_path, local_mode=True)["spark.driver.resource.gpu.discoveryScript"]
    out = subprocess.run([script], env={**os.environ, "CUDA_VISIBLE_DEVICES": visible},
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out) == {"name": "gpu", "addresses": addresses}


def test_discovery_script_without_visibility_lists_what_nvidia_smi_lists(tmp_path):
    script = spark_conf(tmp_path, local_mode=True)["spark.driver.resource.gpu.discoveryScript"]
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\nprintf '0\\n1\\n2\\n'\n")
    (fake / "nvidia-smi").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    out = subprocess.run([script], env={**env, "PATH": f"{fake}:{env['PATH']}"}, capture_output=True, text=True,
                         check=True).stdout
    assert json.loads(out)["addresses"] == ["0", "1", "2"]


def test_worker_takes_the_engines_choice_over_its_local_rank(tmp_path, monkeypatch):
    from bench.spec.rank_spec import RankSpec
    from bench.spec.task import PRESETS
    from bench.worker import Worker

    spec = tmp_path / "spec.json"
    spec.write_text(RankSpec("run-x", "torch-ddp", PRESETS["quick"], "cuda", nodes=1, devices_per_node=4, world_size=4,
                             run_dir=str(tmp_path)).to_json())
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    monkeypatch.delenv("DTBENCH_CUDA_DEVICE", raising=False)
    assert Worker(spec).cuda_device(1) == 0
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3")
    assert Worker(spec).cuda_device(4) == 3
    monkeypatch.setenv("DTBENCH_CUDA_DEVICE", "1")
    assert Worker(spec).cuda_device(4) == 1

