"""What the harness would start on an 8-GPU box split into 2 fake nodes, and on CPU (nothing runs)."""
import json

import pytest

from bench.run import launchers
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.spec.task import get_task
from bench.spec.variants import get_variant

EIGHT_GPUS = Machine(cores=tuple(range(16)), gpus=tuple(map(str, range(8))), gpu_names=("H100",) * 8)


def plan(variant, tmp_path, device_type="cuda", nodes=2, per_node=4, machine=EIGHT_GPUS):
    spec = RunSpec(get_variant(variant), get_task("default"), device_type, nodes, per_node)
    placement = spec.check(machine)
    return spec, launchers.processes(spec, placement, "run-x", tmp_path, tmp_path / "spec.json")


def test_torchrun_one_launcher_per_node_each_seeing_its_gpus(tmp_path):
    _, procs = plan("torch-ddp", tmp_path)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == ["0,1,2,3", "4,5,6,7"]
    for rank, p in enumerate(procs):
        assert "--nnodes=2" in p.command and f"--node-rank={rank}" in p.command
        assert "--nproc-per-node=4" in p.command and "--master-addr=127.0.0.1" in p.command
    assert procs[0].env["OMP_NUM_THREADS"] == "2"  # 16 cores shared by 8 processes


def test_accelerate_config_file_per_node(tmp_path):
    _, procs = plan("accelerate", tmp_path)
    [[(path, _)], [(path1, _)]] = [p.files for p in procs]
    assert (path, path1) == tuple(str(tmp_path / f"accelerate_config_node{i}.json") for i in range(2))
    configs = [json.loads(content) for p in procs for _, content in p.files]
    assert [c["machine_rank"] for c in configs] == [0, 1]
    assert all(c["num_processes"] == 8 and c["num_machines"] == 2 for c in configs)
    assert configs[0]["mixed_precision"] == "no"
    assert "ACCELERATE_USE_CPU" not in procs[0].env


def test_tf_worker_per_slot_sees_one_gpu_and_gets_its_tf_config(tmp_path):
    _, procs = plan("tf-multiworker", tmp_path)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == [str(i) for i in range(8)]
    configs = [json.loads(p.env["TF_CONFIG"]) for p in procs]
    assert [c["task"]["index"] for c in configs] == list(range(8))
    assert len({tuple(c["cluster"]["worker"]) for c in configs}) == 1
    assert all(addr.startswith("127.0.0.1:") for addr in configs[0]["cluster"]["worker"])


def test_tf_worker_per_node_mirrors_its_nodes_gpus(tmp_path):
    _, procs = plan("tf-multiworker-node", tmp_path)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == ["0,1,2,3", "4,5,6,7"]
    assert [json.loads(p.env["TF_CONFIG"])["task"]["index"] for p in procs] == [0, 1]


def test_cpu_runs_hide_gpus_and_size_threads(tmp_path):
    _, procs = plan("torch-ddp", tmp_path, device_type="cpu", nodes=1, per_node=2, machine=Machine(cores=(0, 1)))
    assert procs[0].env["CUDA_VISIBLE_DEVICES"] == "" and procs[0].env["OMP_NUM_THREADS"] == "1"
    # Short: multiprocessing's Unix sockets live there (108 bytes at most); moved into the run folder after.
    assert procs[0].env["TMPDIR"].startswith("/tmp/dtbench-") and len(procs[0].env["TMPDIR"]) < 30


def test_dataparallel_is_one_process_over_all_gpus(tmp_path):
    spec, procs = plan("torch-dp", tmp_path, nodes=1, per_node=8)
    assert len(procs) == 1 and procs[0].env["CUDA_VISIBLE_DEVICES"] == "0,1,2,3,4,5,6,7"


@pytest.mark.parametrize("variant", ["torch-dp", "tf-mirrored"])
def test_single_process_variants_cannot_span_nodes(variant):
    spec = RunSpec(get_variant(variant), get_task("default"), "cuda", 2, 4)
    assert "cannot span 2 nodes" in spec.inapplicable()
