"""`bench sweep --dry-run`: the plan for an 8-GPU box, whole and split into fake nodes, for every variant and
engine, built by the launchers themselves on this CPU machine; and its refusals."""
import json
from collections import defaultdict

import pytest

from bench.results import ResultStore
from bench.run import plan, preview
from bench.spec.task import get_task
from bench.spec.variants import VARIANTS
from helpers import bench, result_row

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
    result = bench("sweep", "--dry-run", "--assume-gpus", "8", "--max-devices", "8", "--nodes", "2",
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
    result = bench("sweep", "--dry-run", "--variants", "torch-ddp", "--max-devices", "2", "--task", "quick",
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
    result = bench("sweep", *dry, *args, "--out", str(tmp_path))
    assert result.returncode == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
