"""The rank -> harness contract (bench.spec.rank_record): every record a rank writes reads back as the same record,
the lines stored runs hold still read, what the worker writes folds into the row, and each metric reads exactly
the records' fields it declares. A field renamed on the rank side fails here."""
import ast
import dataclasses
import json
import os
import time
from pathlib import Path

import pytest

from bench import metrics
from bench.results.jsonl import read_jsonl
from bench.results.row import ResultRow
from bench.run import fold
from bench.spec import rank_record
from bench.spec.rank_record import (RECORD_TYPES, Checkpoint, Collectives, Epoch, Error, FirstStep, Joined, Loader,
                                    Loss, Peak, RankRecord, Restored, Result, SavedModel, UnreadableRecord, Windows,
                                    parse)
from bench.spec.rank_spec import NodePlan, RankSpec
from bench.spec.task import PRESETS
from helpers import REPO

# One line of each record as it lies on disk, every field given: the names stored runs hold. A record's field
# renamed without its line here (and a migration for the stored ones) fails the round trip below.
LINES = {
    Joined: {"event": "joined", "rank": 1, "time": 10.0, "world_size": 2, "local_rank": 1, "node_rank": 0,
             "pid": 4242, "host": "vm", "cores": [2, 3], "cuda_visible": "0,1", "host_addr": "10.0.0.2",
             "interface": "eth1", "malloc": {"MALLOC_ARENA_MAX": "2"}, "framework_version": "2.14.1",
             "device": "cuda:1", "device_name": "NVIDIA H100", "threads": 2, "keras": "keras 3.15.1",
             "backend": "nccl", "kernels": {"onednn": True}, "nccl": "2.27.3"},
    Loader: {"event": "loader", "rank": 0, "time": 10.5, "workers": 1, "cores": 2, "trainer_threads": 1},
    Windows: {"event": "windows", "rank": 0, "time": 11.0, "planned": 5, "timed": 4, "steps": 20},
    FirstStep: {"event": "first_step", "rank": 0, "time": 12.0},
    Loss: {"event": "loss", "rank": 0, "time": 13.0, "step": 10, "samples": 640, "train_s": 1.5, "loss": 2.25},
    Epoch: {"event": "epoch", "rank": 0, "time": 14.0, "epoch": 1, "train_s": 2.0, "samples": 1280, "eval_s": 0.5,
            "test_accuracy": 0.75, "test_loss": 0.8, "eval_samples": 397, "train_loss": 0.9},
    Checkpoint: {"event": "checkpoint", "rank": 0, "time": 14.5, "epoch": 1, "save_s": 0.25, "load_s": 0.125,
                 "bytes": 4096},
    Restored: {"event": "restored", "rank": 0, "time": 9.0, "load_s": 0.125, "epochs_done": 1,
               "directory": "/runs/before/checkpoint"},
    SavedModel: {"event": "model", "rank": 0, "time": 15.0, "flavor": "pytorch", "save_s": 0.5, "bytes": 8192,
                 "error": "OSError: disk full"},
    Result: {"event": "result", "rank": 0, "time": 16.0, "window_seconds": [0.5, 0.25, 0.5], "window_steps": 4,
             "samples_per_window": 256, "train_s": 2.0, "peak_memory_mb": 300.0, "steps": 14, "first_step_s": 0.75,
             "input_wait_s": 0.125, "window_cpu_seconds": [0.5, 0.5, 0.5], "profiled_window_seconds": [1.0],
             "own_window_seconds": [0.25, 0.25, 0.375], "test_accuracy": 0.75, "test_loss": 0.8, "eval_samples": 397,
             "train_loss": 0.9, "epochs": 1, "time_to_accuracy_s": 1.75, "params": 1000, "flops_per_sample": 2e6,
             "fast_path": {"compile": False}, "memory": {"model_state_bytes": {"parameters": 4000}},
             "profile": {"steps": 4, "categories": {}}},
    Error: {"event": "error", "rank": 1, "time": 17.0, "error": "RuntimeError: boom",
            "traceback": "Traceback\n  File x\nRuntimeError: boom"},
    Peak: {"event": "peak", "rank": 0, "time": 18.0, "device_type": "cpu", "device_name": "AMD EPYC", "threads": 1,
           "results": [{"precision": "fp32", "side": 512, "seconds": 0.01, "flops_per_s": 2.7e10}]},
    Collectives: {"event": "collectives", "rank": 0, "time": 19.0, "backend": "gloo",
                  "results": [{"collective": "all_reduce", "size_bytes": 1024, "seconds": 1e-4}]},
}


def test_every_record_has_a_line_and_one_event_of_its_own():
    assert set(LINES) == set(RECORD_TYPES)
    assert len({kind.EVENT for kind in RECORD_TYPES}) == len(RECORD_TYPES)


@pytest.mark.parametrize("kind", RECORD_TYPES, ids=lambda kind: kind.EVENT)
def test_each_record_reads_back_from_its_line_and_writes_the_same_line(kind):
    line = LINES[kind]
    record = parse(json.loads(json.dumps(line)))
    assert type(record) is kind and (record.rank, record.time) == (line["rank"], line["time"])
    assert record.to_line() == line  # every field named as stored: none dropped, none renamed
    assert parse(record.to_line()) == record


def test_an_optional_field_left_none_is_left_off_its_line_and_reads_back_none():
    line = Joined(world_size=1, local_rank=0, node_rank=0, pid=1, host="vm", cores=[0], cuda_visible=None,
                  info={"backend": "gloo"}).to_line()
    assert "host_addr" not in line and "device" not in line and line["cuda_visible"] is None  # required: kept
    assert line["backend"] == "gloo" and parse(line).info == {"backend": "gloo"}
    assert set(SavedModel(error="OSError").to_line()) == {"event", "rank", "time", "error"}


def test_a_line_that_is_no_record_is_refused_by_name_and_skipped_when_a_run_is_read(tmp_path, caplog):
    with pytest.raises(UnreadableRecord, match="'checkpoint' line without save_s"):
        parse({k: v for k, v in LINES[Checkpoint].items() if k != "save_s"})
    with pytest.raises(UnreadableRecord, match="unknown event 'gossip'"):
        parse({"event": "gossip", "rank": 0, "time": 1.0})
    lines = [LINES[FirstStep], {"event": "gossip"}, LINES[Result]]
    (tmp_path / "rank0.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"event": "res')
    assert [type(r) for r in fold.read_rank_records(tmp_path)[0]] == [FirstStep, Result]
    assert "unknown event 'gossip': skipped" in caplog.text


def test_the_rank_reports_stored_in_the_results_read_back_line_for_line():
    """Stored runs' reports (the soak findings) still read: every line a record, none of its fields lost."""
    stored = sorted(REPO.glob("results/**/rank*.jsonl"))
    assert stored
    for path in stored:
        for line in read_jsonl(path):
            written = parse(line).to_line()
            assert {k: v for k, v in written.items() if v is not None} == \
                   {k: v for k, v in line.items() if v is not None}, path


def spied(record: RankRecord, read: dict[type, set[str]]) -> RankRecord:
    """The same record, noting in `read` each of its fields a reader reads."""
    kind = type(record)
    names = {f.name for f in dataclasses.fields(kind)}

    def note(self, name):
        if name in names:
            read.setdefault(kind, set()).add(name)
        return object.__getattribute__(self, name)

    spy = type(f"Spied{kind.__name__}", (kind,), {"__getattribute__": note})
    return spy(**{f.name: getattr(record, f.name) for f in dataclasses.fields(kind)})


def every_record(rank: int) -> list[RankRecord]:
    return [dataclasses.replace(parse(line), rank=rank) for line in LINES.values()]


FOLDING = [m for m in metrics.REGISTRY if m.fold]


@pytest.mark.parametrize("metric", FOLDING, ids=lambda m: m.name)
def test_each_metric_reads_the_fields_it_declares_and_fills_its_row_fields(metric):
    declared = {}
    for reads in metric.reads:
        assert set(reads.fields) <= {f.name for f in dataclasses.fields(reads.record)}, reads
        declared.setdefault(reads.record, set()).update(reads.fields)
    read: dict[type, set[str]] = {}
    records = {rank: [spied(r, read) for r in every_record(rank)] for rank in (0, 1)}
    results = {rank: next(r for r in recs if isinstance(r, Result)) for rank, recs in records.items()}
    filled = metric.fold(metrics.Ranks(results, records, world_size=2, launch_time=5.0))
    assert read == declared  # every record filled in: each field it declares is read, and none besides
    assert set(filled) == set(metric.row_fields)
    # params goes into the row's task (bench.run.execute); every other one is a field of the row
    assert set(metric.row_fields) - {"params"} <= {f.name for f in dataclasses.fields(ResultRow)}


def test_no_harness_module_picks_records_by_an_event_name():
    """The fold and the metrics pick records by their type (Ranks.events, fold.of_kind), never by the line's
    "event" string: that name lives in bench.spec.rank_record alone."""
    events = {kind.EVENT for kind in RECORD_TYPES}
    readers = [REPO / "bench/run/fold.py", REPO / "bench/run/execute.py", REPO / "bench/studies/microbench.py",
               *sorted((REPO / "bench/metrics").glob("*.py"))]
    hits = [f"{path.relative_to(REPO)}:{node.lineno}" for path in readers
            for node in ast.walk(ast.parse(path.read_text()))
            if (isinstance(node, ast.Constant) and node.value == "event")
            or (isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value in events
                                                      for c in [node.left, *node.comparators]))]
    assert hits == []


class SavedState:
    """A checkpoint of nothing: a file a save, the epochs it saved read back."""

    def __init__(self, epochs: int = 0):
        self.epochs = epochs

    def save(self, directory: Path, epochs_done: int) -> None:
        directory.mkdir(exist_ok=True)
        (directory / "state").write_text(str(epochs_done))

    def load(self, directory: Path) -> int:
        return self.epochs


def save_a_model(directory: Path) -> str:
    directory.mkdir()
    (directory / "MLmodel").write_text("flavors: {}")
    return "pytorch"


def test_what_a_worker_records_folds_into_its_row(tmp_path, monkeypatch):
    """Every record the worker's helpers write, read back and folded: one training loop of a rank on a CPU."""
    from bench.worker import Worker

    for name in ("RANK", "LOCAL_RANK", "DTBENCH_FAULT", "DTBENCH_HOST_ADDR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    before = tmp_path / "before"
    before.mkdir()
    task = PRESETS["quick"].replace(checkpoint_every_epoch=True, windows=5, loader_workers=1)
    cores = sorted(os.sched_getaffinity(0))  # the slot this process has already: pinning it changes nothing
    spec = tmp_path / "spec.json"
    spec.write_text(RankSpec("run-x", "torch-ddp", task, "cpu", nodes=1, devices_per_node=1, world_size=1,
                             run_dir=str(tmp_path), log_model=True, resume_from=str(before),
                             node_plans=(NodePlan(0, None, [cores]),)).to_json())
    launch_time = time.time()
    worker = Worker(spec)
    steps = task.timing.warmup_steps + 3 * task.timing.window_steps  # 3 of the 5 windows fit
    with pytest.raises(RuntimeError, match="boom"), worker.session():
        worker.joined(1, framework_version="torch 2.14", device="cpu", device_name="AMD EPYC", threads=1,
                      backend="gloo", kernels={"onednn": True})
        threads = worker.pin()
        first_epoch = worker.restore(SavedState())
        clock = worker.clock(task.recipe.global_batch, sync=lambda: None, steps=steps)
        curve = worker.loss_curve(first_epoch * steps)
        clock.start()
        for _ in clock.timed(range(steps)):
            curve.add(0.5, clock)
        evaluation = worker.end_epoch(clock, 0, 1, lambda: {"test_accuracy": 0.75, "test_loss": 0.8,
                                                            "eval_samples": 397, "train_loss": 0.9}, SavedState(1))
        worker.save_model(save_a_model)
        worker.finish(clock, evaluation, 1, peak_memory_mb=300.0, params=1000, flops_per_sample=2e6,
                      fast_path={"compile": False}, memory={"model_state_bytes": {"parameters": 4000}})
        raise RuntimeError("boom")

    records = fold.read_rank_records(tmp_path)
    assert [type(r) for r in records[0]] == [Joined, Loader, Restored, Windows, FirstStep, Loss, Checkpoint, Epoch,
                                             SavedModel, Result, Error]
    assert fold.first_error(records).startswith("rank 0: RuntimeError: boom")
    row = fold.fold(records, planned_world=1, ranks=[0], launch_time=launch_time)
    assert (row["framework_version"], row["device_name"], row["threads"]) == ("torch 2.14", "AMD EPYC", 1)
    assert row["worker_info"]["backend"] == "gloo" and row["worker_info"]["rank_devices"] == {"0": "cpu"}
    assert len(row["throughput"]["windows"]) == 3 and row["test_accuracy"] == 0.75 and row["epochs"] == 1
    assert row["fast_path"] == {"compile": False} and row["memory"] == {"model_state_bytes": {"0": {"parameters": 4000}}}
    assert row["checkpoint_bytes"] > 0 and row["resumed_after_epochs"] == 0 and row["model_bytes"] > 0
    assert row["curves"]["steps"][0][:2] == [10, 10 * task.recipe.global_batch]
    assert row["curves"]["epochs"][0][0] == 1 and row["curves"]["epochs"][0][3:] == [0.9, 0.8, 0.75]
    assert row["notes"][:2] == ["3 of 5 timing windows fit in the 14 steps trained",
                                f"1 loader worker(s) decode on the slot's {len(cores)} core(s), beside the training's "
                                f"{threads} thread(s)"]
    split = fold.wall_split(records, [0], launch_time, time.time() - launch_time, row["train_s"], row["first_step_s"])
    assert split["checkpoints"] > 0 and split["evaluation"] > 0
