"""TensorFlow variants end to end on CPU (each in its own processes: TF never enters pytest's)."""
import json
import os
import sys
from datetime import datetime

import pytest

from bench.run.processes import processes_of_run
from bench.worker import kernels
from helpers import CPU, REPO, bench, cli, rows


@pytest.mark.slow
def test_as_shipped_leaves_tensorflow_on_its_own_default(out):
    """--as-shipped: oneDNN as TensorFlow decides for this CPU (off on an AVX2-only x86), and the row says so."""
    result = bench("run", "--variant", "tf-single", "--task", "quick", "--as-shipped", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["as_shipped"] is True
    used = row["environment"]["kernels"]
    assert used["onednn"] is kernels.tf_onednn_on_by_default() and used["onednn_switch"] == "unset"
    assert used["as_shipped"] is True and "TF_ENABLE_ONEDNN_OPTS" not in row["command"]
    # started_at is the launch (it was stamped when the row was built, a run's length later)
    joined = next(r["time"] for r in map(json.loads, (out / "runs" / row["run_id"] / "rank0.jsonl").open())
                  if r["event"] == "joined")
    started = datetime.fromisoformat(row["started_at"]).timestamp()
    assert started <= joined <= started + row["startup_s"] + 1


def test_tf_worker_per_node_layout_is_not_applicable_on_cpu(out):
    result = cli("run", "--variant", "tf-multiworker-node", "--devices", "2", "--task", "quick",
                 "--device-type", "cpu", "--out", str(out), env=CPU)
    assert result.returncode == 2 and "gives a worker one CPU device" in result.stderr


@pytest.mark.slow
def test_a_killed_worker_fails_the_run_without_hang_or_orphans(out):
    result = bench("run", "--variant", "tf-multiworker", "--devices", "2", "--task", "quick", "--out", str(out),
                   "--timeout", "120", env={**CPU, "DTBENCH_FAULT": "kill:rank=1:step=3"})
    assert result.returncode == 1
    [row] = rows(out)
    # failed, not timeout: the death is noticed, not waited out
    assert row["status"] == "failed" and "killed by signal 9" in row["error"]
    assert processes_of_run(row["run_id"]) == []


KERAS_COUNT = """
import sys
from bench.spec.task import PRESETS
from tf_impl.model import build_model, count_parameters
print(count_parameters(build_model(PRESETS[sys.argv[1]])))
"""


@pytest.mark.slow
@pytest.mark.parametrize("task", ["quick", "default", "mnist-cnn"])
def test_keras_and_torch_models_have_equal_parameter_counts(task):
    import subprocess

    from bench.spec.task import PRESETS
    from torch_impl.model import build_model, count_parameters

    keras = subprocess.run([sys.executable, "-c", KERAS_COUNT, task], cwd=REPO, capture_output=True, text=True,
                           env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""})
    assert keras.returncode == 0, keras.stderr
    assert int(keras.stdout.split()[-1]) == count_parameters(build_model(PRESETS[task]))
