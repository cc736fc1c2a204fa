"""What the harness would start on an 8-GPU box split into 2 fake nodes, and on CPU (nothing runs)."""
import base64
import dataclasses
import json

import pytest

from bench.run import launch
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.spec.task import get_task
from bench.spec.variants import get_variant

EIGHT_GPUS = Machine(cores=tuple(range(16)), gpus=tuple(map(str, range(8))), gpu_names=("H100",) * 8)


def plan(variant, tmp_path, device_type="cuda", nodes=2, per_node=4, machine=EIGHT_GPUS, **task):
    spec = RunSpec(get_variant(variant), get_task("default", **task), device_type, nodes, per_node)
    placement = spec.check(machine)
    return spec, launch.processes(spec, placement, "run-x", tmp_path, tmp_path / "spec.json")


def test_torchrun_one_launcher_per_node_each_seeing_its_gpus(tmp_path):
    _, procs = plan("torch-ddp", tmp_path)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == ["0,1,2,3", "4,5,6,7"]
    for rank, p in enumerate(procs):
        assert "--nnodes=2" in p.command and f"--node-rank={rank}" in p.command
        assert "--nproc-per-node=4" in p.command and "--master-addr=127.0.0.1" in p.command
    assert procs[0].env["OMP_NUM_THREADS"] == "2"  # 16 cores shared by 8 processes


def test_torch_ddp_static_is_torch_ddps_module_told_static_graph_in_its_spec(tmp_path):
    from bench.run.execute import write_spec

    for variant, told in (("torch-ddp-static", {"static_graph": True}), ("torch-ddp", {})):
        spec, procs = plan(variant, tmp_path)
        assert procs[0].command[-3:-1] == ["torch_impl.ddp", "--spec"]
        written = write_spec(spec, spec.check(EIGHT_GPUS), "run-x", tmp_path, None)
        assert json.loads(written.read_text())["approach"] == told


def test_a_rank_loads_the_spec_the_harness_wrote_into_the_same_typed_fields(tmp_path):
    from bench.run.execute import write_spec
    from bench.spec.rank_spec import RankSpec

    spec, _ = plan("torch-ddp", tmp_path, scaling="weak", per_device_batch=32)
    loaded = RankSpec.load(write_spec(spec, spec.check(EIGHT_GPUS), "run-x", tmp_path, None))
    assert loaded.task == spec.task and loaded.world_size == 8 and loaded.variant == "torch-ddp"
    assert [p.cuda_visible for p in loaded.node_plans] == [list("0123"), list("4567")]
    assert loaded.plan_of(1).cpu_slots == [[8, 9], [10, 11], [12, 13], [14, 15]]
    doc = json.loads((tmp_path / "spec.json").read_text())
    assert doc["task"]["recipe"]["global_batch"] == loaded.task.recipe.global_batch  # the task's tree, as typed
    for task in ({**doc["task"], "recipe": {**doc["task"]["recipe"], "batch_sise": 3}},  # a field no rank knows
                 {**doc["task"], "batch_sise": {}}):                                   # and a group
        with pytest.raises(TypeError, match="batch_sise"):  # fails by name, on load
            RankSpec.from_dict({**doc, "task": task})


def test_an_approach_setting_its_module_does_not_take_fails_by_name():
    from torch_impl.ddp import DDPSettings

    assert DDPSettings(**dict(get_variant("torch-ddp-static").approach)).static_graph
    with pytest.raises(TypeError, match="static_grpah"):
        DDPSettings(static_grpah=True)


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


def test_tf_ps_has_a_chief_a_worker_per_gpu_and_a_parameter_server_per_node(tmp_path):
    _, procs = plan("tf-ps", tmp_path)
    tasks = [(c["task"]["type"], c["task"]["index"]) for c in (json.loads(p.env["TF_CONFIG"]) for p in procs)]
    assert tasks == [("chief", 0), *[("worker", i) for i in range(4)], ("ps", 0), *[("worker", i) for i in range(4, 8)],
                     ("ps", 1)]
    cluster = json.loads(procs[0].env["TF_CONFIG"])["cluster"]
    assert (len(cluster["chief"]), len(cluster["worker"]), len(cluster["ps"])) == (1, 8, 2)
    addresses = [a for addrs in cluster.values() for a in addrs]
    assert len(set(addresses)) == 11 and all(a.startswith("127.0.0.1:") for a in addresses)
    workers = [p for p, (kind, _) in zip(procs, tasks) if kind == "worker"]
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in workers] == [str(i) for i in range(8)]
    assert all(p.env["CUDA_VISIBLE_DEVICES"] == "" for p, (kind, _) in zip(procs, tasks) if kind != "worker")
    assert [p.server for p in procs] == [kind != "chief" for kind, _ in tasks]  # the run ends with the chief


def test_deepspeed_names_each_nodes_gpus_and_its_config_file(tmp_path):
    spec, procs = plan("deepspeed", tmp_path, zero_stage=3)
    assert len(procs) == spec.nodes == 2  # DeepSpeed's launcher once per node
    for node, proc in enumerate(procs):
        flag = next(a for a in proc.command if a.startswith("--world_info="))
        world = json.loads(base64.urlsafe_b64decode(flag.split("=", 1)[1]))
        assert list(world) == ["node0", "node1"] and world[f"node{node}"] == [str(g) for g in range(4 * node, 4 * node + 4)]
        assert f"--node_rank={node}" in proc.command and "--no_local_rank" in proc.command
        [(path, content)] = proc.files
        assert path.endswith("deepspeed_config.json")
        config = json.loads(content)
        assert config["train_batch_size"] == 128 and config["train_micro_batch_size_per_gpu"] == 16
        assert config["zero_optimization"]["stage"] == 3 and config["gradient_clipping"] == 0.0
        # DDP's 25 MiB bucket of fp32 gradients, not DeepSpeed's 5e8 elements allocated whatever the model
        assert config["zero_optimization"]["reduce_bucket_size"] == 25 * 2**20 // 4


def test_fabric_run_starts_each_nodes_devices(tmp_path):
    _, procs = plan("lightning", tmp_path)
    assert len(procs) == 2  # `fabric run` once per node
    for node, proc in enumerate(procs):
        assert proc.command[1:3] == ["-m", "lightning_fabric.cli"]
        assert {"--strategy=ddp", "--devices=4", "--num-nodes=2", f"--node-rank={node}", "--accelerator=cuda",
                "--precision=32-true"} <= set(proc.command)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == ["0,1,2,3", "4,5,6,7"]


def test_fabric_run_with_knobs_set_leaves_the_strategy_to_the_code(tmp_path):
    """The code passes DDPStrategy(**knobs), and Fabric refuses a --strategy beside a strategy object."""
    _, procs = plan("lightning", tmp_path, knobs="static_graph=true")
    assert not any(a.startswith("--strategy") for p in procs for a in p.command)


def test_tf_worker_per_node_mirrors_its_nodes_gpus(tmp_path):
    _, procs = plan("tf-multiworker-node", tmp_path)
    assert [p.env["CUDA_VISIBLE_DEVICES"] for p in procs] == ["0,1,2,3", "4,5,6,7"]
    assert [json.loads(p.env["TF_CONFIG"])["task"]["index"] for p in procs] == [0, 1]


def test_cpu_runs_hide_gpus_and_size_threads(tmp_path):
    _, procs = plan("torch-ddp", tmp_path, device_type="cpu", nodes=1, per_node=2, machine=Machine(cores=(0, 1)))
    assert len(procs) == 1  # one torchrun starts both ranks
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


def test_every_rank_gets_the_tuned_malloc_unless_told_otherwise(tmp_path, monkeypatch):
    """glibc's mmap threshold fixed and trimming off (launch.MALLOC_TUNED); --malloc glibc leaves glibc as shipped;
    a value the user exported wins."""
    for name in launch.MALLOC_TUNED:
        monkeypatch.delenv(name, raising=False)
    spec, procs = plan("torch-ddp", tmp_path, device_type="cpu", nodes=1, per_node=2, machine=Machine(cores=(0, 1)))
    assert {k: procs[0].env[k] for k in launch.MALLOC_TUNED} == launch.MALLOC_TUNED
    glibc = launch.processes(dataclasses.replace(spec, malloc="glibc"), spec.check(Machine(cores=(0, 1))), "run-y",
                             tmp_path, tmp_path / "spec.json")
    assert not any(k in glibc[0].env for k in launch.MALLOC_TUNED)
    # Under a CPU memory budget what the framework frees goes back at once: the budget is its tensors', not the heap's.
    budget = dataclasses.replace(spec, task=spec.task.replace(device_memory_gib=2.0))
    capped = launch.processes(budget, budget.check(Machine(cores=(0, 1))), "run-z", tmp_path, tmp_path / "spec.json")
    assert capped[0].env["MALLOC_MMAP_THRESHOLD_"] == str(2**20) and "MALLOC_TRIM_THRESHOLD_" not in capped[0].env
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "65536")
    _, mine = plan("torch-ddp", tmp_path, device_type="cpu", nodes=1, per_node=2, machine=Machine(cores=(0, 1)))
    assert not any(k in mine[0].env for k in launch.MALLOC_TUNED)  # the exported value reaches the ranks as it is


@pytest.mark.parametrize("variant", ["tf-single", "tf-mirrored", "tf-mirrored-fit", "tf-multiworker",
                                     "tf-multiworker-fit", "tf-ps"])
def test_tensorflow_starts_on_onednn_on_x86_unless_as_shipped(tmp_path, monkeypatch, variant):
    """TensorFlow 2.21 leaves oneDNN off on x86 CPUs without AVX-512 VNNI/AMX: every TF process of a run gets
    TF_ENABLE_ONEDNN_OPTS=1 before TensorFlow is imported; --as-shipped sets nothing of the kind; a value the user
    exported wins; PyTorch's processes get no TensorFlow switch."""
    from bench.worker import kernels
    from tf_impl import fast_path

    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    monkeypatch.setattr(kernels, "is_x86", lambda: True)
    monkeypatch.setattr(fast_path, "is_x86", lambda: True)
    two_cores = Machine(cores=(0, 1))
    spec, procs = plan(variant, tmp_path, device_type="cpu", nodes=1, per_node=2 if variant != "tf-single" else 1,
                       machine=two_cores)
    assert procs and all(p.env["TF_ENABLE_ONEDNN_OPTS"] == "1" for p in procs)
    shipped = launch.processes(dataclasses.replace(spec, as_shipped=True), spec.check(two_cores), "run-y", tmp_path,
                               tmp_path / "spec.json")
    assert all("TF_ENABLE_ONEDNN_OPTS" not in p.env and p.env[kernels.AS_SHIPPED_ENV] == "1" for p in shipped)
    assert dataclasses.replace(spec, as_shipped=True).key.series.endswith("(as shipped)")
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "0")
    _, mine = plan(variant, tmp_path, device_type="cpu", nodes=1, per_node=1, machine=two_cores)
    assert all("TF_ENABLE_ONEDNN_OPTS" not in p.env for p in mine)  # the exported 0 reaches the ranks as it is
    monkeypatch.setattr(fast_path, "is_x86", lambda: False)
    _, arm = plan(variant, tmp_path, device_type="cpu", nodes=1, per_node=1, machine=two_cores)
    assert all("TF_ENABLE_ONEDNN_OPTS" not in p.env for p in arm)


def test_torch_processes_get_no_tensorflow_switch(tmp_path):
    _, procs = plan("torch-ddp", tmp_path, device_type="cpu", nodes=1, per_node=2, machine=Machine(cores=(0, 1)))
    assert "TF_ENABLE_ONEDNN_OPTS" not in procs[0].env
