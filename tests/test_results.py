import dataclasses
import json

import pandas as pd
import pytest

from bench.results import ResultRow, ResultStore, load
from bench.results.jsonl import read_jsonl
from bench.results.row import SCHEMA_VERSION
from bench.run.fold import FoldError, first_error, fold
from bench.spec.rank_record import Error, FirstStep, Joined, Result
from bench.status import Status
from helpers import REPO, result_row


def joined(rank, world):
    return Joined(rank=rank, time=1.0, world_size=world, local_rank=rank, node_rank=0, pid=100 + rank, host="h",
                  cores=[rank], cuda_visible=None, framework_version="x", device_name="cpu", threads=1,
                  info={"backend": "gloo"})


def result(rank, windows=(1.0, 2.0, 1.0, 1.0, 1.0, 1.0)):
    return Result(rank=rank, time=9.0, window_seconds=list(windows), window_steps=10, samples_per_window=1000,
                  steps=70, train_s=8.0, epochs=2, test_accuracy=0.9, test_loss=0.3, eval_samples=397,
                  time_to_accuracy_s=4.0, peak_memory_mb=100.0 + rank)


def records(world=2, joined_world=None):
    return {r: [joined(r, joined_world or world), FirstStep(rank=r, time=3.0 + r), result(r)] for r in range(world)}


def test_fold_takes_rank_zero_windows_and_the_slowest_first_step():
    measured = fold(records(), planned_world=2, ranks=[0, 1], launch_time=1.0)
    assert measured["throughput"]["median"] == 1000
    assert measured["per_device_throughput"] == 500
    assert measured["startup_s"] == 3.0  # rank 1 finished its first step at t=4
    assert measured["eval_samples"] == 397 and measured["peak_memory_mb"] == 101.0


def test_fold_names_the_rank_whose_own_time_is_slowest_and_how_far_behind_the_median_it_is():
    own = {0: [0.10, 0.10, 0.12], 1: [0.30, 0.30, 0.30], 2: [0.10, 0.11, 0.10]}  # seconds a window of 10 steps
    recs = {r: [joined(r, 3), FirstStep(rank=r, time=3.0), dataclasses.replace(result(r), own_window_seconds=own[r])]
            for r in range(3)}
    times = fold(recs, planned_world=3, ranks=[0, 1, 2], launch_time=1.0)["rank_times"]
    assert times["own_ms"] == {"0": 10.0, "1": 30.0, "2": 10.0}  # each rank's median window, a step
    assert times["slowest_rank"] == 1 and times["behind_median"] == pytest.approx(2.0)
    assert times["spread"] == pytest.approx(2.0)
    assert fold(records(), planned_world=2, ranks=[0, 1], launch_time=1.0)["rank_times"] is None  # not timed


def test_fold_catches_a_silent_non_distributed_launch():
    # Two processes that each trained alone report world size 1: not a 2-device run.
    with pytest.raises(FoldError, match="world of size \\[1\\] but the plan is 2"):
        fold(records(world=2, joined_world=1), planned_world=2, ranks=[0, 1], launch_time=0.0)


def test_fold_catches_a_rank_that_never_joined():
    recs = records()
    del recs[1]
    with pytest.raises(FoldError, match="never joined"):
        fold(recs, planned_world=2, ranks=[0, 1], launch_time=0.0)


def test_first_error_names_the_rank_and_keeps_the_traceback_tail():
    recs = records()
    recs[1].append(Error(rank=1, time=5.0, error="RuntimeError: boom",
                         traceback="Traceback\n  File x\nRuntimeError: boom"))
    assert first_error(recs).startswith("rank 1: RuntimeError: boom")


def row(run_id, status="ok", world=1, median=100.0):
    return result_row(world=world, median=median if status == "ok" else None, run_id=run_id, status=status)


def test_store_appends_and_never_rewrites(tmp_path):
    store = ResultStore(tmp_path)
    store.append(row("a"))
    first_line = store.jsonl.read_text()
    store.append(row("b", status="failed"))
    assert store.jsonl.read_text().startswith(first_line)
    assert [r.run_id for r in store.rows()] == ["a", "b"]
    assert not store.csv.exists() and not store.parquet.exists()  # the tables come with the report, not per row


def test_a_row_appended_once_is_not_appended_where_its_run_has_one_a_torn_line_aside(tmp_path):
    """The watchdog's append: a harness killed after storing its run's row, before letting the watchdog go."""
    store = ResultStore(tmp_path)
    assert store.append(row("a")) is True
    with open(store.jsonl, "a") as f:
        f.write('{"run_id": "b", "sta')  # torn: no row of b
    assert store.append(row("a", status="interrupted"), once=True) is False
    assert store.append(row("b", status="interrupted"), once=True) is True
    assert [(r.run_id, r.status) for r in store.rows()] == [("a", "ok"), ("b", "interrupted")]


def test_the_tables_hold_every_run_lists_as_json_text_in_the_csv_and_as_lists_in_parquet(tmp_path):
    store = ResultStore(tmp_path)
    store.append(row("a"))
    store.append(result_row(run_id="b", throughput={"median": 90.0, "ci_low": 80.0, "ci_high": 99.0,
                                                    "windows": [80.0, 90.0, 99.0]}))
    store.export_tables(load(tmp_path))
    csv, parquet = pd.read_csv(store.csv), pd.read_parquet(store.parquet)
    assert list(csv["run_id"]) == list(parquet["run_id"]) == ["a", "b"]
    assert "throughput.median" in csv and "task.name" in csv
    assert json.loads(csv["throughput.windows"][1]) == list(parquet["throughput.windows"][1]) == [80.0, 90.0, 99.0]


def test_load_gives_a_dataframe_with_dotted_columns_and_the_run_key(tmp_path):
    store = ResultStore(tmp_path)
    store.append(row("one", world=1, median=100.0))
    store.append(row("two", world=2, median=150.0))
    runs = load(tmp_path)
    assert list(runs["run_id"]) == ["one", "two"] and list(runs["throughput.median"]) == [100.0, 150.0]
    assert [k.world_size for k in runs["key"]] == [1, 2] and runs["key"][1].label.startswith("torch-ddp 1x2 cpu quick")


def test_rows_round_trip_as_json(tmp_path):
    original = row("a")
    assert ResultRow.from_dict(json.loads(json.dumps(original.to_dict()))) == original


def test_every_status_a_committed_results_folder_holds_is_a_status():
    held = {r["status"] for path in REPO.glob("results/*/results.jsonl") for r in read_jsonl(path)}
    assert {"ok", "skipped", "does not fit", "interrupted"} <= held <= set(Status)


def test_a_row_written_with_a_status_member_reads_back_as_the_plain_string(tmp_path):
    store = ResultStore(tmp_path)
    store.append(row("a", status=Status.DOES_NOT_FIT))
    assert json.loads(store.jsonl.read_text())["status"] == "does not fit"
    store.export_tables(load(tmp_path))
    assert ",does not fit," in store.csv.read_text()
    for stored in (store.dicts()[0]["status"], read_jsonl(store.jsonl)[0]["status"], load(tmp_path)["status"][0]):
        assert type(stored) is str and stored == Status.DOES_NOT_FIT


def test_a_row_written_before_rows_were_versioned_loads_as_this_version(tmp_path):
    old = {k: v for k, v in row("a").to_dict().items() if k not in ("schema_version", "unknown")}
    (tmp_path / "results.jsonl").write_text(json.dumps(old) + "\n")
    [loaded] = ResultStore(tmp_path).rows()
    assert loaded.schema_version == SCHEMA_VERSION and loaded.run_id == "a" and loaded.unknown == {}


def test_a_version_3_row_loses_the_figures_the_report_now_derives_from_it(tmp_path):
    """Version 3 stored the matmuls' precision and a compiled run's compile time; both follow from the row."""
    stored = {**row("a").to_dict(), "schema_version": 3, "matmul_precision": "tf32", "compile_s": 30.0,
              "first_step_s": 30.0, "fast_path": {"tf32": True},
              "task": {"name": "quick", "global_batch": 64, "precision": "fp32", "compile": True}}
    (tmp_path / "results.jsonl").write_text(json.dumps(stored) + "\n")
    [loaded] = ResultStore(tmp_path).rows()
    assert loaded.unknown == {} and "matmul_precision" not in loaded.to_dict() and "compile_s" not in loaded.to_dict()
    from bench.analysis import aggregate
    [line] = aggregate.configurations(load(tmp_path)).to_dict("records")
    assert (line["matmul_precision"], line["compile_s"]) == ("tf32", 30.0)


def test_a_field_this_version_does_not_know_is_kept_written_back_and_named(tmp_path, caplog):
    newer = {**row("a").to_dict(), "schema_version": SCHEMA_VERSION + 1, "joules_per_sample": 0.25}
    (tmp_path / "results.jsonl").write_text(json.dumps(newer) + "\n")
    store = ResultStore(tmp_path)
    [loaded] = store.rows()
    assert loaded.unknown == {"joules_per_sample": 0.25} and loaded.schema_version == SCHEMA_VERSION + 1
    assert loaded.to_dict()["joules_per_sample"] == 0.25 and "unknown" not in loaded.to_dict()
    assert any("joules_per_sample" in r.getMessage() and "kept" in r.getMessage() for r in caplog.records)
    assert load(tmp_path)["joules_per_sample"].tolist() == [0.25]  # and the report's frame has it


def test_a_torn_tail_is_skipped_with_one_warning_and_the_next_row_starts_a_fresh_line(tmp_path, caplog):
    from bench.results import ResultStore
    from helpers import result_row

    store = ResultStore(tmp_path)
    store.append(result_row("torch-ddp", 1))
    with open(store.jsonl, "a") as f:
        f.write('{"run_id": "torn", "sta')  # a kill in the middle of an append
    store.append(result_row("torch-ddp", 2))
    for _ in range(3):  # read again and again: warned once
        assert [r["world_size"] for r in store.dicts()] == [1, 2]
    warnings = [r.getMessage() for r in caplog.records if "not a complete row" in r.getMessage()]
    assert warnings == [f"warning: {store.jsonl} line 2 is not a complete row (a torn or corrupt write): skipped"]
    assert store.jsonl.read_text().count("\n") == 3


def test_one_finished_run_among_repeats_keeps_its_own_window_interval(tmp_path):
    """A configuration run twice, one of them interrupted: its line is the finished run with the interval of
    its windows (not a range over one run), and says the other did not finish."""
    from bench.analysis import aggregate
    store = ResultStore(tmp_path)
    store.append(result_row(run_id="a", throughput={"median": 100.0, "ci_low": 90.0, "ci_high": 108.0}))
    store.append(result_row(run_id="b", median=None, status="interrupted"))
    [line] = aggregate.configurations(load(tmp_path)).to_dict("records")
    assert (line["throughput"], line["ci_low"], line["ci_high"]) == (100.0, 90.0, 108.0)
    assert "1 of 2 runs did not finish ok" in line["notes"] and pd.isna(line.get("runs"))


def test_a_folded_frame_reads_as_records_exactly_as_pandas_gives_them():
    """records_of, which every report section reads its lines through, against pandas' own to_dict("records") on a
    committed folder's runs and configurations: the same keys, values and Python types, NaN where pandas has NaN."""
    import math

    from bench.analysis.folder import Folder
    from bench.results.frame import records_of

    folder = Folder.read(REPO / "results" / "reference-cpu")
    for table in (folder.runs, folder.configs):
        ours, theirs = records_of(table), table.to_dict("records")
        assert len(ours) == len(theirs) == len(table) > 1
        for mine, pandas_line in zip(ours, theirs):
            assert list(mine) == list(pandas_line)
            for name, value in pandas_line.items():
                assert type(mine[name]) is type(value), name
                assert (isinstance(value, float) and math.isnan(value) and math.isnan(mine[name])) \
                    or mine[name] == value, name
