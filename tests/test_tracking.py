"""--mlflow URI: every run is logged to MLflow, offline, with the row's own figures."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from helpers import REPO, bench, rows

READ_BACK = """
import json, sys, mlflow
mlflow.set_tracking_uri(sys.argv[1])
[run] = mlflow.search_runs(experiment_names=["dtbench"], output_format="list")
client = mlflow.MlflowClient()
history = client.get_metric_history(run.info.run_id, "window_throughput")
loss = client.get_metric_history(run.info.run_id, "train_loss")
accuracy = client.get_metric_history(run.info.run_id, "epoch_test_accuracy")
print(json.dumps({"name": run.info.run_name, "params": run.data.params, "metrics": run.data.metrics,
                  "windows": [m.value for m in sorted(history, key=lambda m: m.step)],
                  "train_loss": [[m.step, m.value] for m in sorted(loss, key=lambda m: m.step)],
                  "epoch_test_accuracy": [[m.step, m.value] for m in sorted(accuracy, key=lambda m: m.step)]}))
"""


@pytest.mark.slow
def test_a_run_is_logged_to_mlflow_offline(out, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = bench("run", "--variant", "torch-single", "--task", "quick", "--out", str(out), "--mlflow", uri,
                   env={"MLFLOW_DISABLE_TELEMETRY": "true"})
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    logged = subprocess.run([sys.executable, "-c", READ_BACK, uri], cwd=REPO, capture_output=True, text=True,
                            env={"MLFLOW_DISABLE_TELEMETRY": "true", "PATH": "/usr/bin:/bin"})
    assert logged.returncode == 0, logged.stderr[-2000:]
    run = json.loads(logged.stdout.strip().splitlines()[-1])
    assert run["name"] == row["run_id"]
    assert run["params"]["variant"] == "torch-single" and run["params"]["task.name"] == "quick"
    assert run["metrics"]["throughput_median"] == pytest.approx(row["throughput"]["median"])
    assert run["metrics"]["test_accuracy"] == pytest.approx(row["test_accuracy"])
    assert run["windows"] == pytest.approx(row["throughput"]["windows"])
    # The loss curve as the walkthroughs log it: train_loss with its step, every 10 steps; test accuracy per epoch.
    steps = [step for step, _ in run["train_loss"]]
    assert len(steps) >= 5 and steps == list(range(10, 10 * len(steps) + 1, 10))
    assert run["train_loss"] == [[s, pytest.approx(loss)] for s, _, _, loss in row["curves"]["steps"]]
    assert [epoch for epoch, _ in run["epoch_test_accuracy"]] == [1, 2, 3]
    assert run["epoch_test_accuracy"][-1][1] == pytest.approx(row["test_accuracy"])


def test_mlflow_without_its_extra_is_refused_before_anything_runs(monkeypatch):
    from bench.run import tracking
    from bench.spec.task import SpecError

    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SpecError, match=r"--mlflow needs the 'mlflow' extra: pip install 'dtbench\[mlflow\]'"):
        tracking.require()
