"""Optional MLflow tracking (`--mlflow URI`): each run's spec as params, its figures as metrics, its time series
as MLflow's system metrics, its trained model as the run's logged model.

Logged by the harness once the row is folded, so every variant and engine is tracked the same way and
the figures are the row's own (median and interval over windows, exact accuracy), not one rank's view. The
figures derived from the whole folder (scaling efficiency, MFU) are added to each run once the command ends,
from the folder folded once (`log_derived`).
The model is the MLflow model rank 0 saved with its framework's flavour (`mlflow.pytorch`, `mlflow.keras`) into
the run folder; logging that folder needs neither torch nor TensorFlow in this process (which must never hold both).
Works offline: `sqlite:///path.db` or a folder (`file:` stores need MLFLOW_ALLOW_FILE_STORE, set here).
MLflow's own variables are honoured: `--mlflow` without a URI logs to MLFLOW_TRACKING_URI, and the experiment is
MLFLOW_EXPERIMENT_NAME where set ("dtbench" otherwise); a URI given to `--mlflow` wins over the variable.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import time
from pathlib import Path

from bench import metrics
from bench.results.frame import records_of
from bench.run import sampler
from bench.results.row import ResultRow
from bench.spec.task import SpecError
from bench.status import Status

log = logging.getLogger(__name__)
MODEL_ARTIFACT = "model"
BATCH = 1000  # MLflow's most metrics in one log_batch
METRICS = {
    "throughput_median": lambda r: (r.throughput or {}).get("median"),
    "throughput_ci_low": lambda r: (r.throughput or {}).get("ci_low"),
    "throughput_ci_high": lambda r: (r.throughput or {}).get("ci_high"),
    "per_device_throughput": lambda r: r.per_device_throughput,
    "step_time_ms_median": lambda r: (r.step_time_ms or {}).get("median"),
    "startup_s": lambda r: r.startup_s,
    "train_s": lambda r: r.train_s,
    "wall_s": lambda r: r.wall_s,
    "test_accuracy": lambda r: r.test_accuracy,
    "test_loss": lambda r: r.test_loss,
    "time_to_accuracy_s": lambda r: r.time_to_accuracy_s,
    "peak_memory_mb": lambda r: r.peak_memory_mb,
    "model_bytes": lambda r: r.model_bytes,
    "model_save_s": lambda r: r.model_save_s,
}


def tracking_uri(given: str) -> str:
    """--mlflow's URI: the one given, or (`--mlflow` alone) MLflow's MLFLOW_TRACKING_URI."""
    if given:
        return given
    if not os.environ.get("MLFLOW_TRACKING_URI"):
        raise SpecError("--mlflow without a URI logs to MLFLOW_TRACKING_URI, which is not set: give one, e.g. "
                        "--mlflow sqlite:///mlruns.db")
    return os.environ["MLFLOW_TRACKING_URI"]


def experiment_name() -> str:
    return os.environ.get("MLFLOW_EXPERIMENT_NAME") or "dtbench"


def require() -> None:
    """Before anything runs: a missing extra is a one-line error, not a failure after the first run."""
    if importlib.util.find_spec("mlflow") is None:
        from bench import install

        raise SpecError(f"--mlflow needs the 'mlflow' extra: {install.hint('mlflow')}")


def log_row(uri: str, row: ResultRow, model_dir: Path | None = None, experiment: str | None = None) -> str:
    """One MLflow run for the row; `model_dir`: the run's saved MLflow model, logged as its model "model" where
    the run finished ok and saved one (row.model_bytes), with the row's metrics. Returns the run's link."""
    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")  # it would write telemetry otherwise
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")   # refused by default in MLflow 3
    import mlflow
    from mlflow.entities import Metric
    mlflow.set_tracking_uri(uri)
    experiment = experiment or experiment_name()
    if mlflow.get_experiment_by_name(experiment) is None:
        mlflow.create_experiment(experiment, artifact_location=artifact_location(uri))
    mlflow.set_experiment(experiment)
    params = {"variant": row.variant, "engine": row.engine, "launcher": row.launcher,
              "device_type": row.device_type, "nodes": row.nodes, "devices_per_node": row.devices_per_node,
              "world_size": row.world_size, "independent": row.independent, "git_sha": row.git_sha,
              **flatten(row.task, "task.")}
    with mlflow.start_run(run_name=row.run_id, tags={"status": row.status, "host": row.host or ""}) as run:
        mlflow.log_params({k: v for k, v in params.items() if v is not None})
        saved = row.status == Status.OK and row.model_bytes is not None and model_dir is not None and model_dir.is_dir()
        model_id = log_model(model_dir, run.info.run_id, params) if saved else None
        # The row's figures, the model's too (MLflow's own log_model does the same): through the client, which
        # leaves the run's inputs alone (log_metrics would also list the model as an input of its own run).
        now = int(time.time() * 1000)
        figures = {name: get(row) for name, get in METRICS.items()}
        mlflow.MlflowClient().log_batch(run.info.run_id, metrics=[
            Metric(name, float(value), now, 0, model_id=model_id) for name, value in figures.items()
            if value is not None])
        for step, value in enumerate((row.throughput or {}).get("windows", [])):
            mlflow.log_metric("window_throughput", value, step=step)
        # The loss curve as the walkthroughs log it: train_loss at its step; the test figures per epoch.
        for step, _samples, _seconds, loss in row.curves.get("steps", []):
            mlflow.log_metric("train_loss", loss, step=step)
        for epoch, _samples, _seconds, train_loss, test_loss, test_accuracy in row.curves.get("epochs", []):
            for name, value in (("epoch_train_loss", train_loss), ("epoch_test_loss", test_loss),
                                ("epoch_test_accuracy", test_accuracy)):
                if value is not None:
                    mlflow.log_metric(name, value, step=epoch)
        if model_dir is not None:  # what the run did over time, as MLflow's system metrics (its own tab)
            system = system_metrics(model_dir.parent / sampler.FILE, row.started_at)
            for start in range(0, len(system), BATCH):
                mlflow.MlflowClient().log_batch(run.info.run_id, metrics=system[start:start + BATCH])
        if row.error:
            mlflow.set_tag("error", row.error[:4000])
    return run_link(uri, run.info.experiment_id, run.info.run_id)


def system_metrics(path: Path, started_at: str) -> list:
    """The run's sampler file (bench.run.sampler) as MLflow's system metrics, named as `mlflow.system_metrics`
    names its own (`system/cpu_utilization_percentage`, `system/gpu_0_utilization_percentage`...) and each rank's
    resident memory, at the time each sample was taken (the step: the sample's index)."""
    from datetime import datetime

    import pandas as pd
    from mlflow.entities import Metric

    if not path.is_file():
        return []
    frame = pd.read_parquet(path)
    launched_ms = datetime.fromisoformat(started_at).timestamp() * 1000
    times = {t: step for step, t in enumerate(sorted(frame["t_s"].unique()))}
    series = [("system/cpu_utilization_percentage", frame[frame["kind"] == "core"].groupby("t_s")["busy_pct"].mean())]
    for kind, column, name in (("rank", "rss_mb", "system/rank_{}_memory_usage_megabytes"),
                               ("rank", "cpu_pct", "system/rank_{}_cpu_utilization_percentage"),
                               ("gpu", "util_pct", "system/gpu_{}_utilization_percentage"),
                               ("gpu", "mem_mb", "system/gpu_{}_memory_usage_megabytes"),
                               ("gpu", "power_w", "system/gpu_{}_power_usage_watts")):
        for index, samples in frame[frame["kind"] == kind].groupby("index"):
            series.append((name.format(index), samples.set_index("t_s")[column]))
    return [Metric(name, float(value), int(launched_ms + 1000 * t), times[t])
            for name, values in series for t, value in values.dropna().items()]


def run_link(uri: str, experiment_id: str, run_id: str) -> str:
    """Where a person opens the run: its page on a tracking server's UI; in a local store (SQLite, a folder),
    which has no UI of its own, its `runs:/` URI and the command that serves the store."""
    if uri.startswith(("http://", "https://")):
        return f"{uri.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"
    return f"runs:/{run_id} (to browse it: mlflow ui --backend-store-uri {uri})"


def find_run(uri: str, run_name: str, experiment: str | None = None):
    """The MLflow run `log_row` made for the row named `run_name` (its run id), or None."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    found = mlflow.search_runs(experiment_names=[experiment or experiment_name()], output_format="list",
                               max_results=1, filter_string=f"attributes.run_name = '{run_name}'")
    return found[0] if found else None


def link_of(uri: str, run_name: str) -> str | None:
    """The link of the row's MLflow run (`run_link`); None where it was not logged (the server was down)."""
    try:
        found = find_run(uri, run_name)
    except Exception:  # noqa: BLE001 - the server is down: runner._track has warned already
        return None
    return run_link(uri, found.info.experiment_id, found.info.run_id) if found else None


def log_derived(uri: str, rows: list[ResultRow], configs, experiment: str | None = None) -> None:
    """Each run's configuration's figures as the report derives them from the whole folder (`configs`: the
    folder's configurations frame, bench.analysis.folder), added to the MLflow run `log_row` made for it. A
    server that is down costs a warning, never a measurement."""
    from bench.metrics import present

    os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    import mlflow
    from mlflow.entities import Metric

    lines = {line["key"]: line for line in records_of(configs)} if len(configs) else {}
    mlflow.set_tracking_uri(uri)
    experiment = experiment or experiment_name()
    client, now = mlflow.MlflowClient(), int(time.time() * 1000)
    for row in rows:
        line = lines.get(row.key, {})
        figures = [Metric(name, float(line[name]), now, 0) for name in metrics.derived() if present(line.get(name))]
        try:
            found = find_run(uri, row.run_id, experiment)
            if figures and found:
                client.log_batch(found.info.run_id, metrics=figures)
        except Exception as exc:  # noqa: BLE001 - any tracking failure is a warning, not a lost run
            log.warning("--mlflow: %s's derived figures were not logged: %s", row.run_id, exc)


def log_model(model_dir: Path, run_id: str, params: dict) -> str | None:
    """The saved folder as the run's logged model, what `mlflow.<flavour>.log_model` makes in MLflow 3 (the UI's
    Models tab, `models:/<id>` and `runs:/<run>/model`) without loading it, which would need its framework here:
    a logged model in the run's outputs, the folder's MLmodel told its id and run, its artifacts, READY. One that
    cannot be logged is marked FAILED and named in the run's tags; None then."""
    import shutil
    import tempfile

    import mlflow
    from mlflow.entities import LoggedModelOutput, LoggedModelStatus
    from mlflow.models import Model

    model = mlflow.initialize_logged_model(name=MODEL_ARTIFACT, source_run_id=run_id,
                                           params={k: str(v) for k, v in params.items() if v is not None})
    client = mlflow.MlflowClient()
    try:
        with tempfile.TemporaryDirectory() as temp:  # the run folder's copy stays as saved (model_bytes)
            folder = Path(shutil.copytree(model_dir, Path(temp) / MODEL_ARTIFACT))
            described = Model.load(folder)
            described.model_id, described.model_uuid, described.run_id = model.model_id, model.model_id, run_id
            described.artifact_path = model.artifact_location
            described.save(folder / "MLmodel")
            client.log_model_artifacts(model.model_id, str(folder))
    except Exception as exc:  # noqa: BLE001 (a store, disk or MLmodel error): the run's figures are still logged
        mlflow.finalize_logged_model(model.model_id, LoggedModelStatus.FAILED)
        client.set_tag(run_id, "model_error", f"the trained model was not logged: {exc}"[:4000])
        log.warning("--mlflow: %s's trained model was not logged: %s", run_id, exc)
        return None
    client.log_outputs(run_id, models=[LoggedModelOutput(model.model_id, step=0)])
    mlflow.finalize_logged_model(model.model_id, LoggedModelStatus.READY)
    return model.model_id


def artifact_location(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts (the models): for a SQLite store its folder's mlruns/, beside the
    database, not MLflow's default of ./mlruns wherever the harness happens to run; the store's own otherwise."""
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri.removeprefix("sqlite:///")).resolve().parent / "mlruns").as_uri()


def flatten(data: dict, prefix: str = "") -> dict:
    """Nested dicts -> dotted parameter names; lists as JSON text."""
    flat = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, list):
            flat[name] = json.dumps(value)
        else:
            flat[name] = value
    return flat
