"""bench overhead: each framework's harness run against a plain loop of that framework and, for a timm model,
against timm's own train benchmark, interleaved; and the settings of the loops it found wanting."""
import argparse
import json
import os
import subprocess
import sys

import pytest

from bench.spec.task import SpecError, get_task
from bench.studies import overhead
from helpers import CPU, REPO, bench, cli
from tf_impl.configure import inter_op_threads


def test_a_tensorflow_rank_with_no_peer_keeps_tensorflows_own_inter_op_pool_and_one_with_peers_gets_a_second_thread():
    # tf-single on one core: TensorFlow's own default in a process pinned to one core is 1 inter-op thread;
    # a second cost it 5-14 % on EfficientNet-B0 (issue 51).
    assert inter_op_threads(threads=1, peers=False, logical_cpus=1) == 1
    assert inter_op_threads(threads=4, peers=False, logical_cpus=1) == 4
    # A collective or a parameter server's RPC blocks its inter-op thread until its peers answer: other processes
    # of the cluster (tf-ps's chief at one device too), or replicas in this process.
    assert inter_op_threads(threads=1, peers=True, logical_cpus=1) == 2
    assert inter_op_threads(threads=1, peers=False, logical_cpus=2) == 2
    assert inter_op_threads(threads=3, peers=True, logical_cpus=1) == 3


def study_args(**given) -> argparse.Namespace:
    fields = dict(warmup_steps=None, window_steps=None, windows=None, model=None, input=None, image_size=None,
                  channels=None, global_batch=None)
    return argparse.Namespace(**{**fields, **given})


def test_the_study_times_at_least_timms_warm_up_and_windows_long_enough_to_outlast_a_hiccup():
    task = overhead.overhead_task(get_task("quick"), study_args())
    # The quick task's own timing is 2 warm-up steps and 5 windows of 4 steps: one hiccup moved its median.
    assert (task.timing.warmup_steps, task.timing.window_steps, task.timing.windows) == (10, 10, 8)
    longer = overhead.overhead_task(get_task("default"), study_args())
    assert (longer.timing.warmup_steps, longer.timing.window_steps, longer.timing.windows) == (20, 20, 10)
    given = overhead.overhead_task(get_task("quick"), study_args(warmup_steps=3, window_steps=2, windows=4))
    assert (given.timing.warmup_steps, given.timing.window_steps, given.timing.windows) == (3, 2, 4)


def test_a_library_model_is_measured_as_a_new_user_tries_it_unless_told_otherwise():
    task = overhead.overhead_task(get_task("quick", model="efficientnet_b0", image_size=32, channels=3),
                                  study_args(model="efficientnet_b0"))
    assert (task.model.image_size, task.model.channels, task.data.input, task.recipe.global_batch) == (32, 3, "synthetic", 32)
    told = overhead.overhead_task(get_task("quick", model="timm:resnet18", global_batch=8, image_size=48, channels=3),
                                  study_args(model="timm:resnet18", global_batch=8, image_size=48, channels=3,
                                             input="memory"))
    assert (told.model.image_size, told.recipe.global_batch, told.data.input) == (48, 8, "memory")


def test_a_real_dataset_trains_as_many_epochs_as_the_timed_steps_need(tmp_path):
    from bench.worker import data

    task = overhead.overhead_task(get_task("quick"), study_args())
    per_epoch = len(data.load(data.prepare(task))["train_y"]) // task.recipe.global_batch
    epochs = overhead.epochs_for_windows(task, data.prepare(task))
    assert (epochs - 1) * per_epoch < 10 + 10 * 8 <= epochs * per_epoch
    assert overhead.epochs_for_windows(task.replace(input="synthetic"), None) == 1


def test_only_the_frameworks_that_build_the_model_are_compared_and_none_is_one_line():
    assert overhead.frameworks_for(get_task("quick"), "both") == ["torch", "tensorflow", "jax"]
    assert overhead.frameworks_for(get_task("quick", model="timm:resnet18", image_size=32, channels=3), "both") == ["torch"]
    with pytest.raises(SpecError, match="--framework torch"):
        overhead.frameworks_for(get_task("quick", model="timm:resnet18", image_size=32, channels=3), "tensorflow")
    # The peer (timm's benchmark) builds timm's models only, on PyTorch's side.
    paired = get_task("quick", model="efficientnet_b0", image_size=32, channels=3)
    assert overhead.peer_model(paired, "torch") == "efficientnet_b0" and overhead.peer_model(paired, "tensorflow") is None
    assert overhead.peer_model(get_task("quick"), "torch") is None


def test_each_side_is_read_with_both_statistics_over_the_same_steps():
    # Windows of equal samples: the mean is samples over all their seconds, not the mean of the rates.
    got = overhead.both_statistics([100.0, 100.0, 50.0])
    assert got["median"] == 100.0 and got["mean"] == pytest.approx(3 / (1 / 100 + 1 / 100 + 1 / 50))
    task = get_task("quick").replace(window_steps=2, global_batch=10)
    peer = overhead.peer_statistics({"step_seconds": [0.1, 0.1, 0.2, 0.2, 0.1, 0.1], "samples_per_sec": 55.0}, task)
    assert peer["windows"] == pytest.approx([100.0, 50.0, 100.0]) and peer["median"] == pytest.approx(100.0)
    assert peer["mean"] == 55.0  # the peer's own figure, as its users read it


@pytest.mark.slow
def test_the_peer_runs_timms_measurement_with_the_optimizer_it_is_told():
    # timm's benchmark trains with its "sgd" (Nesterov); with "momentum" it does the task's work.
    for opt, nesterov in (("momentum", False), ("sgd", True)):
        done = subprocess.run([sys.executable, "-m", "probes.timm_train", "--model", "resnet18", "--batch-size", "2",
                               "--img-size", "32", "--num-classes", "10", "--num-warm-iter", "1", "--num-bench-iter",
                               "3", "--opt", opt, "--cores", "0"], cwd=REPO, capture_output=True, text=True,
                              env={**os.environ, **CPU}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        result = json.loads(done.stdout.strip().splitlines()[-1])
        assert result["opt"] == opt and result["nesterov"] is nesterov and len(result["step_seconds"]) == 3
        assert result["samples_per_sec"] == pytest.approx(6 / sum(result["step_seconds"]), rel=0.5)


@pytest.mark.slow
def test_overhead_compares_each_frameworks_harness_with_its_plain_loop_and_timms_benchmark(tmp_path):
    done = bench("overhead", "--task", "quick", "--model", "efficientnet_b0", "--repeats", "1", "--warmup-steps", "2",
                 "--window-steps", "2", "--windows", "3", "--out", str(tmp_path), env=CPU, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    summary = json.loads((tmp_path / "overhead.json").read_text())
    assert set(summary) == {"torch", "tensorflow"}
    assert summary["tensorflow"]["harness"] == "tf-single" and summary["torch"]["harness"] == "torch-single"
    assert set(summary["torch"]["ratios"]) == {f"{side}:{stat}" for side in ("plain", "peer", "peer_as_shipped")
                                              for stat in ("median", "mean")}
    assert set(summary["tensorflow"]["ratios"]) == {"plain:median", "plain:mean"}
    for framework in summary.values():
        [round_] = framework["pairs"]
        assert all(len(side["windows"]) == 3 and side["median"] > 0 for side in round_.values())
        assert framework["ratios"]["plain:median"]["ratios"] == [round_["harness"]["median"] / round_["plain"]["median"]]
    assert "tensorflow: harness tf-single / plain loop (probes.plain_tf_loop), median of windows" in done.stdout
    assert "torch: harness torch-single / timm's train benchmark with the task's SGD" in done.stdout


def test_overhead_on_cuda_without_a_gpu_is_refused_in_one_line():
    done = cli("overhead", "--device-type", "cuda", "--task", "quick", env=CPU)
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert "--device-type cuda: no GPU here" in done.stderr
