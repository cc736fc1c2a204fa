"""deepspeed (ZeRO 1/2/3, DeepSpeed's launcher, a config file per run) and lightning (Fabric, `fabric run`):
they train the task as DDP does, refuse what they cannot do in one line, and die cleanly."""
import glob
import json
import os

import pytest

from bench.run.processes import processes_of_run
from bench.analysis.folder import Folder
from tests.listening import ListenerWatch
from helpers import CPU, bench, bench_with_own_shm, cli, rows

# DeepSpeed's CPU all-reduce segments of this user's runs on loopback (deepspeed_impl.launch.deepspeed)
DEEPSPEED_SEGMENTS = f"/dev/shm/deepspeed_allreduce_buffer_{os.getuid()}_127.0.0.1_*"


@pytest.mark.parametrize("args, message", [
    (["--variant", "deepspeed", "--zero-stage", "4"], "--zero-stage 4 is not a ZeRO stage: choose 1, 2 or 3"),
    (["--variant", "deepspeed", "--zero-stage", "0"], "--zero-stage 0 is not a ZeRO stage"),
    (["--variant", "torch-ddp", "--zero-stage", "2"], "--zero-stage goes with deepspeed"),
    (["--variant", "torch-dp", "--accelerate-plugin", "fsdp"], "torch-dp has no --accelerate-plugin"),
    (["--variant", "lightning", "--accelerate-plugin", "deepspeed"], "lightning has no --accelerate-plugin"),
    (["--variant", "accelerate", "--accelerate-plugin", "zero"], "unknown --accelerate-plugin 'zero'"),
    (["--variant", "accelerate", "--accelerate-plugin", "fsdp", "--device-type", "cpu"], "needs CUDA"),
    (["--variant", "deepspeed", "--checkpoint-every-epoch"], "deepspeed does not checkpoint yet"),
    (["--variant", "lightning", "--compile"], "--compile is not wired for lightning"),
    (["--variant", "deepspeed", "--engine", "ray"], "deepspeed runs only under its own launcher"),
    (["--variant", "deepspeed", "--accelerate-plugin", "fsdp"], "deepspeed has no --accelerate-plugin"),
    (["--variant", "accelerate", "--accelerate-plugin", "fsdp", "--zero-stage", "2"], "--zero-stage goes with"),
    (["--variant", "tf-ps", "--input", "files"], "tf-ps reads the in-memory input only"),
])
def test_bad_sharding_options_are_one_line_and_exit_2(tmp_path, args, message):
    result = cli("run", *args, "--task", "quick", "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert not (tmp_path / "results.jsonl").exists()


def test_a_sweep_refuses_a_zero_stage_nothing_in_it_takes(tmp_path):
    result = cli("sweep", "--variants", "accelerate,torch-ddp", "--zero-stage", "3", "--task", "quick", "--dry-run",
                 "--out", str(tmp_path), env=CPU)
    assert result.returncode == 2 and "--zero-stage goes with deepspeed" in result.stderr


def test_a_sweep_runs_deepspeed_at_each_zero_stage_from_its_own_config_file(tmp_path):
    result = cli("sweep", "--variants", "deepspeed,lightning", "--max-devices", "2", "--task", "quick",
                 "--dry-run", "--no-analysis", "--out", str(tmp_path), env=CPU)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for stage in (1, 2, 3):
        assert f"deepspeed (ZeRO-{stage}) 1x2 cpu" in text
    configs = [json.loads(line.split("deepspeed_config.json: ", 1)[1]) for line in text.splitlines()
               if "deepspeed_config.json: " in line]
    assert sorted(c["zero_optimization"]["stage"] for c in configs) == [1, 1, 2, 2, 3, 3]
    for config in configs:
        assert config["gradient_clipping"] == 0.0  # DeepSpeed's default (1.0) would change the training
        assert config["gradient_accumulation_steps"] == 1
        assert config["train_batch_size"] // config["train_micro_batch_size_per_gpu"] in (1, 2)  # the world size
    assert "-m deepspeed.launcher.launch" in text and "-m lightning_fabric.cli" in text and "--strategy=ddp" in text


@pytest.mark.slow
def test_every_sharded_approach_and_fabric_train_as_ddp_does_holding_their_share_of_its_state(tmp_path):
    """Same model, data order, optimizer and schedule: fp32 on CPU gives DDP's accuracy, every test image once.
    And the model state each of the 2 ranks holds, counted from its tensors: DDP keeps the whole state on each
    rank; FSDP2 and ZeRO-3 half of parameters, gradients and optimizer state (FSDP's shards are whole rows of each
    parameter: within a few percent); ZeRO-1 and 2 keep every parameter and shard the optimizer state (and the
    gradients: DeepSpeed reduces them into the rank's partition at both stages). ZeRO adds an fp32 master copy of
    the rank's partition, even in fp32. The shares do not depend on the model's size: the quick task's CNN."""
    runs = [("torch-ddp",), ("torch-fsdp",), ("lightning",), *[("deepspeed", "--zero-stage", str(s)) for s in (1, 2, 3)]]
    segments = set(glob.glob(DEEPSPEED_SEGMENTS))
    for variant, *extra in runs:
        with ListenerWatch(tmp_path) as watch:
            result, left = bench_with_own_shm("run", "--variant", variant, *extra, "--devices", "2", "--task", "quick",
                                              "--out", str(tmp_path), env=CPU)
        assert result.returncode == 0, result.stderr[-3000:]
        # Their rendezvous joins the run's store on 127.0.0.1 (torch's own would listen on every interface).
        assert watch.seen and watch.beyond_loopback() == set(), (variant, watch.seen)  # its own listeners, seen
        # Nothing outlives the run in its /dev/shm (DeepSpeed's CPU all-reduce segments, 66 MB of RAM a rank, are
        # removed with it); without root, no /dev/shm of its own: at least no segment of DeepSpeed's.
        if left is not None:
            assert left == [], (variant, left)
        assert set(glob.glob(DEEPSPEED_SEGMENTS)) <= segments
    ddp, fsdp, fabric, *zero = found = rows(tmp_path)
    for row in found[1:]:
        assert row["status"] == "ok" and row["eval_samples"] == 397, row["error"]  # FSDP: one rank's last batch empty
        assert row["test_accuracy"] >= row["task"]["target_accuracy"]
        assert abs(row["test_accuracy"] - ddp["test_accuracy"]) < (0.05 if row is fsdp else 0.01), row["variant"]
        assert set(row["memory"]["model_state_bytes"]) == {"0", "1"}
    assert fsdp["fast_path"]["channels_last"] is False
    assert zero[-1]["task"]["zero_stage"] == 3
    assert (tmp_path / "runs" / zero[-1]["run_id"] / "deepspeed_config.json").exists()

    params = 4 * 13_706  # fp32 bytes of the quick task's CNN
    states = {"fsdp": fsdp, "fabric": fabric, **{f"zero{s}": row for s, row in zip((1, 2, 3), zero)}}
    for rank in ("0", "1"):
        whole = ddp["memory"]["model_state_bytes"][rank]
        assert whole["parameters"] == params
        assert whole["optimizer"] == params  # SGD momentum: one buffer a parameter

        def share(name, part):
            return states[name]["memory"]["model_state_bytes"][rank][part] / whole[part]

        for part in ("parameters", "gradients", "optimizer"):
            assert share("fabric", part) == 1.0, (rank, part)  # Fabric's strategy here is DDP
            assert share("fsdp", part) == pytest.approx(0.5, abs=0.03), (rank, part)
            assert share("zero3", part) == pytest.approx(0.5, abs=0.01), (rank, part)
        for stage in ("zero1", "zero2"):
            assert share(stage, "parameters") == pytest.approx(1.0, abs=0.01)
            assert share(stage, "optimizer") == pytest.approx(0.5, abs=0.01)
            assert share(stage, "gradients") == pytest.approx(0.5, abs=0.01)
        for stage in ("zero1", "zero2", "zero3"):
            master = states[stage]["memory"]["model_state_bytes"][rank]["master_weights"]
            assert master == pytest.approx(params / 2, rel=0.01)


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["deepspeed", "lightning"])
def test_a_killed_rank_under_the_variants_own_launcher_fails_the_run_and_leaves_no_process(tmp_path, variant):
    segments = set(glob.glob(DEEPSPEED_SEGMENTS))
    result = bench("run", "--variant", variant, "--devices", "2", "--task", "quick", "--out", str(tmp_path),
                   "--timeout", "120", env={**CPU, "DTBENCH_FAULT": "kill:rank=1:step=3"})
    assert result.returncode == 1
    [row] = rows(tmp_path)
    assert row["status"] == "failed" and row["error"], row  # failed, not timeout: the death is noticed
    assert processes_of_run(row["run_id"]) == []
    assert set(glob.glob(DEEPSPEED_SEGMENTS)) <= segments  # nor the killed rank's shared memory


def test_the_report_labels_zero_stages_apart_and_flags_tf_ps_as_asynchronous(tmp_path):
    import dataclasses

    from bench.report import report
    from bench.results import ResultStore
    from helpers import result_row

    store = ResultStore(tmp_path)
    task = {"name": "quick", "dataset": "digits", "model": "small-cnn", "precision": "fp32", "global_batch": 64}
    mib = 2**20
    for variant, stage, master in (("deepspeed", 1, 0.5), ("deepspeed", 3, 0.5), ("tf-ps", None, 0)):
        parts = {"parameters": mib, "gradients": mib / 2, "optimizer": mib / 2, "master_weights": master * mib}
        row = result_row(variant, 2, 1000.0, task={**task, "zero_stage": stage}, asynchronous=variant == "tf-ps",
                         memory={"model_state_bytes": {"0": parts, "1": parts}})
        store.append(dataclasses.replace(row, run_id=f"{variant}{stage}"))
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "deepspeed (ZeRO-1)" in text and "deepspeed (ZeRO-3)" in text
    assert "tf-ps (asynchronous)" in text and "(asynchronous): tf-ps's workers push updates" in text
    memory = text.split("### Memory per device")[1].split("###")[0]
    assert "1.00 · 0.50 · 0.50 + 0.50 master" in memory and "| 2.50" in memory  # the master copy counts
