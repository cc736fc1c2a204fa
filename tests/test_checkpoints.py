"""Checkpoints each approach's own way: saved every epoch, timed and counted in the row, and a run killed
mid-training and continued with --resume-from ends exactly where an uninterrupted run does."""
from __future__ import annotations

import pytest

from bench.worker import FAULT_ENV
from helpers import CPU, bench, cli, rows

# Each checkpoint code path once: torch-single saves as torch-ddp does (one TorchCheckpoint of the unwrapped
# model), tf-single as tf-mirrored (one loop, another strategy), tf-multiworker-fit as tf-mirrored-fit (Keras'
# BackupAndRestore); tf-multiworker is the custom loop's path where every worker writes.
VARIANTS = {"torch-dp": 1, "torch-ddp": 2, "accelerate": 2, "tf-mirrored": 2, "tf-multiworker": 2,
            "tf-mirrored-fit": 2}


@pytest.mark.slow
@pytest.mark.parametrize("variant", VARIANTS)
def test_a_killed_run_resumed_from_its_checkpoint_ends_as_an_uninterrupted_one(tmp_path, variant):
    run = ["run", "--variant", variant, "--devices", str(VARIANTS[variant]), "--task", "quick",
           "--checkpoint-every-epoch", "--out", str(tmp_path)]
    whole = bench(*run, env=CPU)
    assert whole.returncode == 0, whole.stderr
    killed = bench(*run, env={**CPU, FAULT_ENV: "kill:step=30"})  # in epoch 2 of 3 (22 steps each)
    assert killed.returncode == 1
    [uninterrupted, failed] = rows(tmp_path)
    assert failed["status"] == "failed"
    resumed = bench(*run, "--resume-from", str(tmp_path / "runs" / failed["run_id"]), env=CPU)
    assert resumed.returncode == 0, resumed.stderr
    continued = rows(tmp_path)[2]
    assert (continued["resumed_from"], continued["resumed_after_epochs"]) == (failed["run_id"], 1)
    # Same seed, the data order of each epoch restored: the same training, to the last bit.
    assert continued["test_loss"] == uninterrupted["test_loss"]
    assert continued["test_accuracy"] == uninterrupted["test_accuracy"]
    for row in (uninterrupted, continued):
        assert row["checkpoint_save_s"] > 0 and row["checkpoint_load_s"] > 0
        assert row["checkpoint_bytes"] > 4 * row["task"]["params"]  # at least the fp32 weights
    assert continued["resume_load_s"] > 0


def test_resume_from_another_configuration_is_refused_in_one_line(tmp_path):
    run_dir = tmp_path / "runs" / "old"
    (run_dir / "checkpoint").mkdir(parents=True)
    (run_dir / "checkpoint" / "checkpoint.pt").write_bytes(b"x")
    (run_dir / "spec.json").write_text('{"variant": "torch-ddp", "world_size": 2, "nodes": 1, "device_type": "cpu", '
                                       '"task": {"name": "quick", "epochs": 3}}')
    refused = cli("run", "--variant", "torch-ddp", "--devices", "1", "--task", "quick", "--checkpoint-every-epoch",
                  "--resume-from", str(run_dir), "--out", str(tmp_path), env=CPU)
    assert refused.returncode == 2
    [line] = refused.stderr.strip().splitlines()
    assert line.startswith(f"error: --resume-from {run_dir} trained another configuration") and "world_size 2" in line
    nothing = cli("run", "--variant", "torch-ddp", "--task", "quick", "--resume-from", str(tmp_path / "runs"),
                  "--out", str(tmp_path), env=CPU)
    assert nothing.returncode == 2 and "not a run folder" in nothing.stderr
    (run_dir / "spec.json").unlink()
    (run_dir / "spec.json").mkdir()  # there, but no file to read
    unreadable = cli("run", "--variant", "torch-ddp", "--task", "quick", "--checkpoint-every-epoch", "--resume-from",
                     str(run_dir), "--out", str(tmp_path), env=CPU)
    assert unreadable.returncode == 2 and len(unreadable.stderr.strip().splitlines()) == 1
    assert "its spec.json cannot be read (Is a directory)" in unreadable.stderr
