"""A TensorFlow variant asked for CUDA where TensorFlow sees fewer GPUs than the run gives it: refused
before training, never a silent CPU run beside PyTorch rows on GPUs.

The harness is shown a GPU (the box's own nvidia-smi, or on a CPU machine a stand-in that lists one) and
hands the run GPU id 99, which no CUDA driver has: TensorFlow's list of visible GPUs is really empty —
with tensorflow-cpu, or with a GPU build — and the message is TensorFlow's count, not a mocked one."""
import os
import shutil

import pytest

from helpers import bench, rows


@pytest.fixture
def one_gpu_shown(tmp_path):
    env = {"CUDA_VISIBLE_DEVICES": "99"}
    if shutil.which("nvidia-smi") is None:
        fake = tmp_path / "bin"
        fake.mkdir()
        (fake / "nvidia-smi").write_text("#!/bin/sh\necho '99, Stand-in GPU, 81559'\n")
        (fake / "nvidia-smi").chmod(0o755)
        env["PATH"] = f"{fake}:{os.environ['PATH']}"
    return env


@pytest.mark.slow
def test_bench_run_refuses_with_one_line_naming_the_fix(tmp_path, one_gpu_shown):
    result = bench("run", "--variant", "tf-single", "--task", "quick", "--device-type", "cuda",
                   "--out", str(tmp_path / "out"), env=one_gpu_shown)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert "tf-single asked for cuda on 1 GPU(s)" in line and "sees 0" in line
    # The fix it names: the CUDA build the tf extra installs lacks its libraries here; a CPU-only one, .venv-tf.
    assert "check the driver, CUDA_VISIBLE_DEVICES and TensorFlow's CUDA libraries" in line or ".venv-tf" in line
    assert not rows(tmp_path / "out")


@pytest.mark.slow
def test_a_sweep_records_the_workers_refusal_as_a_failed_row(tmp_path, one_gpu_shown):
    out = tmp_path / "out"
    result = bench("sweep", "--variants", "tf-mirrored", "--max-devices", "1", "--task", "quick",
                   "--device-type", "cuda", "--no-analysis", "--out", str(out), env=one_gpu_shown)
    assert result.returncode == 1
    [row] = rows(out)
    assert row["status"] == "failed"
    assert "GPUsNotSeen: tf-mirrored asked for cuda on 1 GPU(s) (99)" in row["error"] and "sees 0" in row["error"]
