"""A results folder is read and folded once a command: `bench sweep` (besides its provisional answer, which folds
the folder as it stands halfway), `bench report` and `bench compare`, however many runs it holds. Counted in this
process on synthetic runs: each run's row made from its spec, nothing trained."""
from __future__ import annotations

from collections import Counter

import pytest

from bench import cli
from bench.results.jsonl import RESULTS
from bench.run.execute import base_row, new_run_id
from bench.status import Status


def synthetic_run(spec, out_dir, machine, data_path, environment=None, store=None):
    row = base_row(spec, new_run_id(spec), Status.OK)
    median = 1000.0 * spec.world_size ** 0.9
    row.throughput = {"median": median, "ci_low": 0.98 * median, "ci_high": 1.02 * median, "windows": [0.99 * median, median, 1.01 * median]}
    row.per_device_throughput, row.test_accuracy, row.environment = median / spec.world_size, 0.9, environment
    if store is not None:  # as execute stores it
        store.append(row)
    return row


@pytest.fixture
def counted(monkeypatch):
    """How often the folder's rows are read (results.jsonl) and folded (aggregate.configurations)."""
    from bench.analysis import aggregate
    from bench.results import store
    from bench.sweep import runner

    counts = Counter()
    fold, read = aggregate.configurations, store.read_jsonl

    def counted_fold(runs, *args, **kwargs):
        counts["folds"] += 1
        return fold(runs, *args, **kwargs)

    def counted_read(path):
        counts["reads"] += path.name == RESULTS and "reference-" not in path.parent.name  # the clock's references
        return read(path)

    monkeypatch.setattr(aggregate, "configurations", counted_fold)
    monkeypatch.setattr(store, "read_jsonl", counted_read)
    monkeypatch.setattr(runner, "execute", synthetic_run)
    return counts


def sweep(out, repeats: int, *extra: str) -> None:
    """torch-single at 1 slot, torch-ddp at 1 and 2 (3 runs a round), `repeats` rounds."""
    assert cli.main(["sweep", "--variants", "torch-single,torch-ddp", "--max-devices", "2", "--task", "quick",
                     "--no-analysis", "--repeats", str(repeats), "--out", str(out), *extra]) == 0


@pytest.mark.parametrize("repeats", [3, 13])
def test_a_sweep_folds_its_folder_once_however_many_runs(tmp_path, counted, capsys, repeats):
    sweep(tmp_path / "out", repeats)
    printed = capsys.readouterr().out
    halfway = printed.count("provisional answer")  # the folder as it stood then: one fold of its own
    runs = (tmp_path / "out" / RESULTS).read_text().count("\n")
    assert runs == 3 * repeats and halfway <= 1
    assert counted["folds"] == 1 + halfway
    # before the first run the sweep's clock reads what the folder held (for its estimate and for its ETAs), then
    # the answer halfway and the end: never once a run
    assert counted["reads"] == 3 + halfway
    assert (tmp_path / "out" / "results.csv").exists() and (tmp_path / "out" / "results.parquet").exists()


def test_report_and_compare_fold_each_folder_once(tmp_path, counted):
    for name in ("a", "b"):
        sweep(tmp_path / name, 1)
    counted.clear()
    assert cli.main(["report", str(tmp_path / "a")]) == 0
    assert counted == {"folds": 1, "reads": 1}
    counted.clear()
    assert cli.main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(tmp_path / "c")]) == 0
    assert counted == {"folds": 2, "reads": 2}


@pytest.mark.slow
@pytest.mark.parametrize("repeats", [3, 13])
def test_with_mlflow_a_sweep_still_folds_once(tmp_path, counted, capsys, monkeypatch, repeats, mlflow_store):
    """Each run is logged as it ends; the figures derived from the whole folder once, at the end (one query and
    one batch a run), not the folder refolded after every run."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_DISABLE_TELEMETRY", "true")
    uri = mlflow_store()
    sweep(tmp_path / "out", repeats, "--mlflow", uri)
    assert counted["folds"] == 1 + capsys.readouterr().out.count("provisional answer")

    import mlflow
    mlflow.set_tracking_uri(uri)
    logged = mlflow.search_runs(experiment_names=["dtbench"], output_format="list")
    assert len(logged) == 3 * repeats
    on_two = [run for run in logged if run.data.params["world_size"] == "2" and
              run.data.params["variant"] == "torch-ddp" and run.data.params["independent"] == "False"]
    assert on_two and all(run.data.metrics["scaling_efficiency"] == pytest.approx(2 ** 0.9 / 2) for run in on_two)
