"""`bench sweep --dry-run`: the plan for an 8-GPU box, whole and split into fake nodes, for every variant and
engine, built by the launchers themselves on this CPU machine; and its refusals."""
import json
import re
from collections import defaultdict

import pytest

from bench.results import ResultStore
from bench.sweep import plan, preview
from bench.spec.task import get_task
from bench.spec.variants import VARIANTS
from helpers import cli, result_row

EIGHT = preview.assumed_machine(8, tuple(range(16)))


def sweep_plan(tmp_path, nodes, engines=(("torchrun", None),)):
    specs = plan.plan(list(VARIANTS.values()), get_task("default"), "cuda", plan.device_counts(8), nodes,
                      engines=list(engines), variants_named=engines[0][0] == "torchrun", analysis=True)
    return preview.build(specs, EIGHT, tmp_path)


def check_gpus(run: preview.RunPlan) -> None:
    spec = run.spec
    by_node = defaultdict(list)
    for rank in run.ranks:
        # A process per device trains on exactly one GPU; a single process drives each of its node's.
        expected = spec.devices_per_node if spec.processes_per_node == 1 else 1
        assert len(rank.gpus) == expected, (spec.key.label, rank)
        by_node[rank.node] += rank.gpus
    for node, gpus in by_node.items():
        assert len(gpus) == len(set(gpus)) == spec.devices_per_node, f"{spec.key.label}: node {node} uses {gpus}"
    nodes = list(by_node.values())
    assert len(set().union(*map(set, nodes))) == sum(map(len, nodes)), f"{spec.key.label}: nodes share GPUs"
    assert len(by_node) == spec.nodes
    if spec.processes_per_node > 1 or spec.on_engine:
        assert sorted(r.rank for r in run.ranks) == list(range(spec.world_size))


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_every_rank_of_every_variant_has_its_own_gpu_on_an_eight_gpu_box(tmp_path, nodes):
    runs = [r for r in sweep_plan(tmp_path, nodes) if not r.skipped]
    assert {r.spec.variant.name for r in runs} == set(VARIANTS)
    assert max(r.spec.world_size for r in runs) == 8
    if nodes > 1:
        assert any(r.spec.nodes == nodes for r in runs)
    for run in runs:
        check_gpus(run)


@pytest.mark.parametrize("nodes", [1, 2, 4])
def test_every_tensorflow_worker_agrees_on_tf_config(tmp_path, nodes):
    runs = [r for r in sweep_plan(tmp_path, nodes) if not r.skipped and r.spec.variant.launcher == "tf-config"]
    assert runs
    for run in runs:
        configs = [r.tf_config for r in run.ranks]
        assert len({json.dumps(c["cluster"], sort_keys=True) for c in configs}) == 1
        assert sorted(c["task"]["index"] for c in configs) == list(range(len(configs)))
        assert all(c["task"]["type"] == "worker" for c in configs)
        assert len(configs[0]["cluster"]["worker"]) == run.spec.nodes * run.spec.processes_per_node


@pytest.mark.parametrize("engine", ["dask", "spark"])
def test_engines_give_each_fake_nodes_ranks_that_nodes_gpus(tmp_path, engine):
    runs = [r for r in sweep_plan(tmp_path, 2, engines=[(engine, None)]) if not r.skipped]
    assert runs and all(r.spec.engine == engine for r in runs)
    for run in runs:
        check_gpus(run)
        [driver] = run.processes
        assert driver.env["CUDA_VISIBLE_DEVICES"] == ",".join(g for r in run.ranks for g in r.gpus)


def test_torchrun_ranks_of_one_run_meet_at_one_address(tmp_path):
    runs = [run for run in sweep_plan(tmp_path, 2)
            if not run.skipped and run.spec.variant.launcher in ("torchrun", "accelerate")]
    assert {run.spec.variant.launcher for run in runs} == {"torchrun", "accelerate"}
    assert any(run.spec.world_size == 8 for run in runs)
    for run in runs:
        assert len({r.rendezvous for r in run.ranks}) == 1, run.spec.key.label


def test_the_issue_command_prints_the_plan_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    result = cli("sweep", "--dry-run", "--assume-gpus", "8", "--max-devices", "8", "--nodes", "2",
                 "--variants", "all", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "8 GPUs (assumed" in result.stdout and "Nothing is started" in result.stdout
    assert "accelerate_config_node1.json: {" in result.stdout and "TF_CONFIG=" in result.stdout
    assert "node 1 rank 7/8 local 3: GPU 7" in result.stdout
    assert not out.exists()


def test_an_earlier_results_folder_gives_an_estimate(tmp_path):
    store = ResultStore(tmp_path)
    for wall in (30.0, 50.0, 40.0):
        store.append(result_row("torch-ddp", 1, task={"name": "quick", "global_batch": 64, "precision": "fp32"},
                                wall_s=wall, engine="torchrun"))
    result = cli("sweep", "--dry-run", "--variants", "torch-ddp", "--max-devices", "2", "--task", "quick",
                 "--device-type", "cpu", "--no-analysis", "--scaling", "strong", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    # world 1 by its own rows (median 40 s), world 2 by the same variant's: the reference holds no quick-task row
    assert "Estimate: 1 min for 2 runs" in result.stdout and "1 by their own configuration" in result.stdout


@pytest.mark.parametrize("args, message", [
    (["--assume-gpus", "8", "--device-type", "cpu"], "drop --device-type cpu"),
    (["--assume-gpus", "0"], "assume at least 1 GPU"),
    (["--assume-gpus", "8"], "add --dry-run"),
])
def test_bad_assumptions_are_one_line_and_exit_2(tmp_path, args, message):
    dry = [] if "add --dry-run" in message else ["--dry-run"]
    result = cli("sweep", *dry, *args, "--out", str(tmp_path))
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_default_on_gpus_is_resnet50_at_224_px_in_bf16_with_its_projected_time(tmp_path):
    result = cli("sweep", "--dry-run", "--assume-gpus", "8", "--max-devices", "8", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Task default-gpu: resnet50 at 224 px, bf16, 256 images a device, sized to the GPUs' memory: 80 GB" in out
    assert "[1/59] torch-ddp 1x8 cuda default-gpu/bf16 batch 2048 (weak)" in out  # fit has no twin: its phases
    # Priced from the one-GPU H100 step, said to be a projection with no measured error yet.
    projected = next(line for line in out.splitlines() if line.startswith("Estimate (projected): about "))
    minutes = int(projected.split("about ")[1].split(" min")[0])
    assert 10 <= minutes <= 30 and "reference-h100-resnet50" in projected and "error is unknown" in projected


def test_the_default_on_a_cpu_stays_the_small_cnn(tmp_path):
    result = cli("sweep", "--dry-run", "--max-devices", "2", "--device-type", "cpu", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    assert "Task default: small-cnn at 28 px, fp32, 128 images a device; 2 epochs of fashion-mnist" in result.stdout
    assert "default-gpu" not in result.stdout


@pytest.mark.parametrize("memory_mib, batch", [(None, 256), (81_559, 256), (143_771, 256), (40_960, 128),
                                               (24_564, 64), (16_384, 32), (8_192, 32)])
def test_the_gpu_defaults_batch_follows_the_gpus_memory(memory_mib, batch):
    from bench.request import gpu_batch

    assert gpu_batch(memory_mib) == batch


def test_a_smaller_gpu_is_planned_with_a_smaller_batch_and_says_why(tmp_path):
    import argparse

    from bench.cli import build_parser
    from bench.spec import devices
    from bench import request

    args = build_parser().parse_args(["sweep", "--max-devices", "2"])
    small = devices.Machine(cores=(0, 1), gpus=("0", "1"), gpu_names=("L4",) * 2, gpu_memory_mib=(23_034,) * 2)
    task = request.task_from(argparse.Namespace(**vars(args)), "cuda", small)
    assert (task.name, task.model.name, task.model.image_size, task.recipe.precision) == ("default-gpu", "resnet50", 224, "bf16")
    assert task.recipe.global_batch == 64
    assert "sized to the GPUs' memory: 22 GiB" in preview.task_line(task, small)
    told = request.task_from(build_parser().parse_args(["sweep", "--global-batch", "32"]), "cuda", small)
    assert told.recipe.global_batch == 32  # the user's batch is the user's


def test_the_default_two_slot_sweep_plans_at_most_32_launches_and_keeps_every_input_cost(tmp_path):
    """`make bench`'s plan on a 2-core CPU machine: the input's cost of each one-device run in its own input phases
    where its loop has them, else from a synthetic-input twin, so that the table's column is still whole."""
    result = cli("sweep", "--dry-run", "--max-devices", "2", "--device-type", "cpu", "--variants", "all",
                 "--task", "default", "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    runs = re.findall(r"^\[\d+/(\d+)\] (.+?) (\d+x\d+) cpu", result.stdout, re.M)
    assert 0 < len(runs) <= 32 and all(int(total) == len(runs) for total, _, _ in runs)
    lines = re.findall(r"^\[\d+/\d+\] .*$", result.stdout, re.M)
    twins = {name.removesuffix(" (synthetic)") for _, name, topology in runs if name.endswith(" (synthetic)")}
    for line, (_, name, topology) in zip(lines, runs):
        if topology == "1x1" and not name.endswith(" (synthetic)"):
            assert "input phases" in line or name in twins, line
    assert twins == {"tf-ps (asynchronous)"}  # the one loop that cannot hold a batch (docs/methodology.md)
