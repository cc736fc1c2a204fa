"""--mlflow URI: every run is logged to MLflow, offline, with the row's own figures and its trained model."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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


# The logged model, read back in its own process (never TensorFlow beside torch): its flavour, and its accuracy on
# the whole test set, which must be the run's (the saved model is the one trained, not a fresh or a shard's).
READ_MODEL = """
import json, sys
import mlflow, numpy as np, yaml
from bench.worker import data

uri, spec_file = sys.argv[1], sys.argv[2]
mlflow.set_tracking_uri(uri)
[run] = mlflow.search_runs(experiment_names=["dtbench"], output_format="list")
[logged] = mlflow.search_logged_models(experiment_ids=[run.info.experiment_id], output_format="list")
model_uri = f"models:/{logged.model_id}"  # as MLflow 3 lists it in the run's Models tab
folder = mlflow.artifacts.download_artifacts(artifact_uri=model_uri)
flavors = sorted(yaml.safe_load(open(folder + "/MLmodel"))["flavors"])
arrays = data.load(json.load(open(spec_file))["data_path"])
x = (arrays["test_x"].astype(np.float32) / 255.0 - data.PIXEL_MEAN) / data.PIXEL_STD  # what the loops feed the model
if "pytorch" in flavors:
    import mlflow.pytorch, torch
    model = mlflow.pytorch.load_model(model_uri)
    with torch.no_grad():
        logits = model(torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))).numpy()
else:
    import mlflow.keras
    logits = np.asarray(mlflow.keras.load_model(model_uri).predict(x, verbose=0))
print(json.dumps({"flavors": flavors, "accuracy": float((logits.argmax(1) == arrays["test_y"]).mean()),
                  "metrics": run.data.metrics}))
"""


@pytest.mark.slow
@pytest.mark.parametrize("variant, devices, flavor", [("torch-ddp", "2", "pytorch"), ("tf-multiworker", "2", "keras")])
def test_the_trained_model_is_logged_as_an_mlflow_model(out, tmp_path, variant, devices, flavor):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = bench("run", "--variant", variant, "--devices", devices, "--task", "quick", "--epochs", "1",
                   "--out", str(out), "--mlflow", uri, env={"MLFLOW_DISABLE_TELEMETRY": "true"})
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    run_dir = out / "runs" / row["run_id"]
    model_dir = run_dir / "model"
    assert row["status"] == "ok" and row["model_bytes"] == sum(f.stat().st_size for f in model_dir.rglob("*")
                                                               if f.is_file())
    logged = subprocess.run([sys.executable, "-c", READ_MODEL, uri, str(run_dir / "spec.json")], cwd=REPO,
                            capture_output=True, text=True, env={"MLFLOW_DISABLE_TELEMETRY": "true", "PATH": "/usr/bin:/bin"})
    assert logged.returncode == 0, logged.stderr[-2000:]
    read = json.loads(logged.stdout.strip().splitlines()[-1])
    assert read["flavors"] == sorted([flavor, "python_function"])
    assert read["accuracy"] == pytest.approx(row["test_accuracy"], abs=1.5 / row["eval_samples"])
    assert read["metrics"]["model_bytes"] == row["model_bytes"]

    if flavor != "pytorch":
        return
    # Without --mlflow no rank saves a model (the same switch in every loop: Worker.logs_model).
    plain = tmp_path / "plain"
    result = bench("run", "--variant", variant, "--devices", devices, "--task", "quick", "--epochs", "1",
                   "--out", str(plain))
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(plain)
    assert row["model_bytes"] is None and not (plain / "runs" / row["run_id"] / "model").exists()


def test_mlflow_without_its_extra_is_refused_before_anything_runs(monkeypatch):
    from bench.sweep import tracking
    from bench.spec.task import SpecError

    monkeypatch.setattr(tracking.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SpecError, match=r"--mlflow needs the 'mlflow' extra: pip install 'mlflow>=3.17'"):
        tracking.require()


def test_the_model_folder_is_logged_beside_the_database_only_for_an_ok_run_that_saved_one(tmp_path, monkeypatch,
                                                                                         mlflow_store):
    """The harness's half, with no framework: a saved folder becomes the MLflow run's logged model (what MLflow 3's
    Models tab lists, with the row's metrics), in the SQLite store's folder (not ./mlruns where the harness runs);
    a failed run or one without a model logs none. The run folder's copy is left as saved (model_bytes)."""
    import mlflow
    import yaml

    from bench.sweep import tracking
    from helpers import result_row

    monkeypatch.chdir(tmp_path / "..")
    model = tmp_path / "runs" / "r" / "model"
    (model / "data").mkdir(parents=True)
    (model / "MLmodel").write_text("flavors:\n  pytorch: {}\n  python_function: {}\n")
    (model / "data" / "weights").write_bytes(b"0" * 10)
    saved = sorted((p.relative_to(model), p.read_bytes()) for p in model.rglob("*") if p.is_file())
    uri = mlflow_store()
    links = {name: tracking.log_row(uri, result_row(run_id=name, **fields), model)
             for name, fields in (("saved", {"model_bytes": 23}), ("failed", {"status": "failed", "model_bytes": 23}),
                                  ("none", {}))}
    mlflow.set_tracking_uri(uri)
    runs = {r.info.run_name: r for r in mlflow.search_runs(experiment_names=["dtbench"], output_format="list")}
    # A local store has no UI of its own: the link is the run's URI and the command that serves the store.
    assert links["saved"] == f"runs:/{runs['saved'].info.run_id} (to browse it: mlflow ui --backend-store-uri {uri})"
    assert tracking.link_of(uri, "failed") == links["failed"] and tracking.link_of(uri, "absent") is None
    [logged] = mlflow.search_logged_models(experiment_ids=[runs["saved"].info.experiment_id], output_format="list")
    assert logged.source_run_id == runs["saved"].info.run_id and logged.name == "model"
    assert logged.status.to_proto() == mlflow.entities.LoggedModelStatus.READY.to_proto()
    assert [o.model_id for o in mlflow.get_run(logged.source_run_id).outputs.model_outputs] == [logged.model_id]
    assert {m.key: m.value for m in logged.metrics}["model_bytes"] == 23
    assert runs["saved"].data.metrics["model_bytes"] == 23
    for where in (f"models:/{logged.model_id}", f"runs:/{logged.source_run_id}/model"):  # both URIs users write
        folder = Path(mlflow.artifacts.download_artifacts(artifact_uri=where, dst_path=str(tmp_path / "dl" / where[:4])))
        described = yaml.safe_load((folder / "MLmodel").read_text())
        assert described["model_id"] == logged.model_id and described["run_id"] == logged.source_run_id
        assert sorted(described["flavors"]) == ["python_function", "pytorch"]
        assert (folder / "data" / "weights").read_bytes() == b"0" * 10
    assert not mlflow.get_run(logged.source_run_id).inputs.model_inputs  # an output of its run, not an input
    assert sorted((p.relative_to(model), p.read_bytes()) for p in model.rglob("*") if p.is_file()) == saved
    assert (tmp_path / "mlruns").is_dir() and not (tmp_path.parent / "mlruns").exists()


def test_a_model_that_cannot_be_logged_is_marked_failed_and_the_runs_figures_are_kept(tmp_path, monkeypatch,
                                                                                      mlflow_store):
    import mlflow

    from bench.sweep import tracking
    from helpers import result_row

    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"
    model.mkdir()
    (model / "MLmodel").write_text("flavors: [unclosed\n")  # a torn MLmodel file
    uri = mlflow_store()
    tracking.log_row(uri, result_row(run_id="torn", model_bytes=23), model)
    mlflow.set_tracking_uri(uri)
    [run] = mlflow.search_runs(experiment_names=["dtbench"], output_format="list")
    assert run.info.status == "FINISHED" and run.data.metrics["model_bytes"] == 23
    assert run.data.tags["model_error"].startswith("the trained model was not logged: ")
    [logged] = mlflow.search_logged_models(experiment_ids=[run.info.experiment_id], output_format="list")
    assert logged.status.to_proto() == mlflow.entities.LoggedModelStatus.FAILED.to_proto()
    assert not run.outputs.model_outputs


def test_rows_from_before_the_model_was_logged_still_load():
    from bench.results.row import ResultRow
    from helpers import result_row

    old = result_row().to_dict()
    del old["model_bytes"], old["model_save_s"]
    assert ResultRow.from_dict(old).model_bytes is None


def test_mlflows_own_variables_name_the_store_and_the_experiment_and_a_given_uri_wins(tmp_path, monkeypatch,
                                                                                     mlflow_store):
    """`--mlflow` alone logs to MLFLOW_TRACKING_URI, into MLFLOW_EXPERIMENT_NAME; a URI given wins. Runs made from
    their specs in this process (nothing trained)."""
    pytest.importorskip("mlflow")
    from bench import cli
    from bench.sweep import runner, tracking
    from test_folds import synthetic_run

    monkeypatch.setattr(runner, "execute", synthetic_run)
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert cli.main(["run", "--variant", "torch-single", "--task", "quick", "--out", str(tmp_path / "none"),
                     "--mlflow"]) == 2  # no URI anywhere: one line naming the fix
    from_env, given = mlflow_store("env.db"), mlflow_store("given.db")
    monkeypatch.setenv("MLFLOW_TRACKING_URI", from_env)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "team-benchmarks")
    assert cli.main(["run", "--variant", "torch-single", "--task", "quick", "--out", str(tmp_path / "a"),
                     "--mlflow"]) == 0
    assert cli.main(["run", "--variant", "torch-single", "--task", "quick", "--out", str(tmp_path / "b"),
                     "--mlflow", given]) == 0
    import mlflow

    for uri in (from_env, given):
        mlflow.set_tracking_uri(uri)
        assert len(mlflow.search_runs(experiment_names=["team-benchmarks"], output_format="list")) == 1
        assert mlflow.get_experiment_by_name("dtbench") is None
    assert tracking.experiment_name() == "team-benchmarks"


def test_the_runs_samples_are_logged_as_mlflow_system_metrics_at_their_times(tmp_path, mlflow_store):
    """The sampler's file (cores, ranks, GPUs every tick) as MLflow's own system metrics: the cores' mean busy
    share, each rank's memory, each GPU's utilisation, at launch + the sample's time."""
    import mlflow
    import pandas as pd

    from bench.run.sampler import COLUMNS
    from bench.sweep import tracking
    from helpers import result_row

    run_dir = tmp_path / "runs" / "sampled"
    run_dir.mkdir(parents=True)
    ticks = [(0.5, "core", 0, None, None, 20.0, None, None, None, None),
             (0.5, "core", 1, None, None, 60.0, None, None, None, None),
             (0.5, "rank", 0, 700.0, 95.0, None, None, None, None, None),
             (0.5, "gpu", 0, None, None, None, 88.0, 1234.0, 300.0, 1980.0),
             (1.0, "core", 0, None, None, 100.0, None, None, None, None),
             (1.0, "core", 1, None, None, 50.0, None, None, None, None),
             (1.0, "rank", 0, 710.0, 99.0, None, None, None, None, None),
             (1.0, "gpu", 0, None, None, None, 90.0, 1300.0, 310.0, 1980.0)]
    pd.DataFrame(ticks, columns=list(COLUMNS)).to_parquet(run_dir / "timeseries.parquet")
    uri = mlflow_store()
    tracking.log_row(uri, result_row(run_id="sampled", started_at="2026-12-02T10:00:00+00:00"), run_dir / "model")
    client = mlflow.MlflowClient(uri)
    run_id = tracking.find_run(uri, "sampled").info.run_id

    def history(name: str) -> list[tuple[int, int, float]]:
        return sorted((m.step, m.timestamp, m.value) for m in client.get_metric_history(run_id, name))

    launched_ms = 1796205600000  # 2026-12-02T10:00:00Z
    assert history("system/cpu_utilization_percentage") == [(0, launched_ms + 500, 40.0), (1, launched_ms + 1000, 75.0)]
    assert [v for _, _, v in history("system/rank_0_memory_usage_megabytes")] == [700.0, 710.0]
    assert [v for _, _, v in history("system/gpu_0_utilization_percentage")] == [88.0, 90.0]
    assert [v for _, _, v in history("system/gpu_0_power_usage_watts")] == [300.0, 310.0]
