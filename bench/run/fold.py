"""Folding the JSON lines every rank reported into one row: the run's own record here (whether it adds up, what
rank 0 said of its framework and devices, checkpoints, the loss curve, the profile, notes), each figure's fields by
its metric (bench.metrics)."""
from __future__ import annotations

import statistics
from pathlib import Path

from bench import metrics
from bench.results.jsonl import read_jsonl

_ROW_FIELDS_FROM_JOIN = {"event", "rank", "time", "world_size", "local_rank", "node_rank", "pid", "host", "cores",
                         "cuda_visible", "framework_version", "device_name", "threads", "keras"}


class FoldError(RuntimeError):
    """The ranks' reports do not add up to a valid measurement."""


def read_rank_records(run_dir: Path) -> dict[int, list[dict]]:
    records: dict[int, list[dict]] = {}
    for path in sorted(run_dir.glob("rank*.jsonl")):
        rank = int(path.stem[4:])
        records[rank] = read_jsonl(path)  # a rank killed mid-write leaves a torn last line
    return records


class ResultWatch:
    """Whether every one of `ranks` has recorded its result yet, reading only what each rank's file gained since
    the last look (a run's wait asks several times a second)."""
    MARK = b'{"event": "result"'

    def __init__(self, run_dir: Path, ranks: list[int]):
        self.paths = {rank: run_dir / f"rank{rank}.jsonl" for rank in ranks}
        self.read = {rank: 0 for rank in ranks}
        self.tail = {rank: b"" for rank in ranks}
        self.done: set[int] = set()

    def __call__(self) -> bool:
        for rank, path in self.paths.items():
            if rank in self.done:
                continue
            try:
                with open(path, "rb") as f:
                    f.seek(self.read[rank])
                    new = f.read()
            except OSError:
                return False
            self.read[rank] += len(new)
            seen = self.tail[rank] + new
            if self.MARK in seen:
                self.done.add(rank)
            self.tail[rank] = seen[-len(self.MARK):]
        return bool(self.paths) and len(self.done) == len(self.paths)


def first_error(records: dict[int, list[dict]]) -> str | None:
    """The earliest error any rank reported, with the end of its traceback."""
    errors = [r for recs in records.values() for r in recs if r["event"] == "error"]
    if not errors:
        return None
    err = min(errors, key=lambda r: r["time"])
    tail = err.get("traceback", "").strip().splitlines()[-6:]
    return f"rank {err['rank']}: {err['error']}\n" + "\n".join(tail)


def fold(records: dict[int, list[dict]], planned_world: int, ranks: list[int], launch_time: float) -> dict:
    """Fold the JSON lines of the ranks started on this host (rank 0 among them) into one row's fields: the
    metrics' figures (bench.metrics.fold) and the run's own record."""
    joined = {rank: [r for r in records[rank] if r["event"] == "joined"] for rank in records}
    missing = [rank for rank in ranks if not joined.get(rank)]
    if missing:
        raise FoldError(f"ranks {missing} never joined (expected ranks {ranks[0]}..{ranks[-1]})")
    worlds = {j[-1]["world_size"] for j in joined.values()}
    if worlds != {planned_world}:
        raise FoldError(f"workers joined a world of size {sorted(worlds)} but the plan is {planned_world}: "
                        "the launcher started independent processes instead of one distributed run")
    results = {rank: [r for r in records.get(rank, []) if r["event"] == "result"] for rank in ranks}
    if not all(results.values()):
        raise FoldError(f"ranks {[r for r, v in results.items() if not v]} finished without a result")
    folded = metrics.Ranks({rank: results[rank][-1] for rank in ranks}, records, planned_world, launch_time)
    main = folded.main

    def events(name: str) -> list[dict]:  # rank 0's: the run's own record is kept there
        return folded.events(name, rank=0)

    info = joined[0][-1]
    if len(main["window_seconds"]) < 1:
        raise FoldError("no timing window completed")
    return {
        "framework_version": info.get("framework_version"),
        "device_name": info.get("device_name"),
        "threads": info.get("threads"),
        "keras": info.get("keras"),
        **metrics.fold(folded),
        "fast_path": main.get("fast_path") or {},
        **checkpoints(events("checkpoint"), events("restored")),
        **saved_model(events("model")),
        "curves": curves(events("loss"), events("epoch")),
        "profile": profiled(main),
        "notes": [f"{w['timed']} of {w['planned']} timing windows fit in the {w['steps']} steps trained"
                  for w in events("windows")] + [
            f"{w['workers']} loader worker(s) decode on the slot's {w['cores']} core(s), beside the training's "
            f"{w['trainer_threads']} thread(s)" for w in events("loader")[-1:]] + [
            f"--mlflow: the model was not saved: {m['error']}" for m in events("model") if m.get("error")],
        # What rank 0 said of its framework and devices (backend, CUDA/NCCL, replicas...), and every rank's cores.
        "worker_info": {**{k: v for k, v in info.items() if k not in _ROW_FIELDS_FROM_JOIN},
                        "cores": {str(r): joined[r][-1]["cores"] for r in sorted(joined)},
                        "cuda_visible": {str(r): joined[r][-1].get("cuda_visible") for r in sorted(joined)},
                        # the device each rank chose from what it could see (bench.worker.gpus)
                        "rank_devices": {str(r): joined[r][-1].get("device") for r in sorted(joined)}},
    }


def wall_split(records: dict[int, list[dict]], ranks: list[int], launch_time: float, wall_s: float,
               train_s: float, first_step_s: float | None) -> dict | None:
    """Where a run's wall time went, in seconds that add up to `wall_s`: start-up (launch to the slowest rank's
    first step), training (the clock's time after that step), evaluation and checkpoints (rank 0's, the clock
    paused), the rest of the ranks' lives after their first step (counting FLOPs, saving the model, the
    epoch-end bookkeeping) and teardown (the last rank's result to the end of the harness's wait: processes
    exiting, servers killed, the sampler's file written)."""
    def events(name: str) -> list[dict]:
        return [r for rank in ranks for r in records.get(rank, []) if r["event"] == name]

    first_steps, results = [e["time"] for e in events("first_step")], [e["time"] for e in events("result")]
    if not first_steps or not results:
        return None
    rank0 = records.get(0, [])
    evaluation = sum(r.get("eval_s") or 0.0 for r in rank0 if r["event"] == "epoch")
    checkpoints = sum((r.get("save_s") or 0.0) + (r.get("load_s") or 0.0) for r in rank0 if r["event"] == "checkpoint")
    startup = max(first_steps) - launch_time
    training = max(0.0, train_s - (first_step_s or 0.0))
    teardown = launch_time + wall_s - max(results)
    other = max(results) - max(first_steps) - training - evaluation - checkpoints
    return {"startup": startup, "training": training, "evaluation": evaluation, "checkpoints": checkpoints,
            "other": other, "teardown": teardown}


def profiled(main: dict) -> dict | None:
    """Rank 0's profile (--profile) and profiling's own cost: its windows' step, as the clock timed them, against
    the timed windows' median step."""
    profile = main.get("profile")
    if not profile:
        return None
    step_s = statistics.median(main["window_seconds"]) / main["window_steps"]
    clocked_s = sum(main["profiled_window_seconds"]) / profile["steps"]
    return {**profile, "clocked_step_ms": 1e3 * clocked_s, "unprofiled_step_ms": 1e3 * step_s,
            "overhead": clocked_s / step_s - 1}


def curves(losses: list[dict], epochs: list[dict]) -> dict:
    """Rank 0's loss every few steps and every epoch's evaluation, as the row's loss curves."""
    return {"steps": [[e["step"], e["samples"], e["train_s"], e["loss"]] for e in losses],
            "epochs": [[e["epoch"], e.get("samples"), e["train_s"], e.get("train_loss"), e.get("test_loss"),
                        e.get("test_accuracy")] for e in epochs]}


def saved_model(saved: list[dict]) -> dict:
    """--mlflow: what rank 0's save of the trained model wrote (none where it failed: the notes say why)."""
    done = [m for m in saved if not m.get("error")]
    return {"model_bytes": done[-1]["bytes"], "model_save_s": done[-1]["save_s"]} if done else {}


def checkpoints(saved: list[dict], restored: list[dict]) -> dict:
    """Rank 0's checkpoint figures: every rank waits for a save, so rank 0's time is the stall."""
    figures = {}
    if saved:
        loads = [c["load_s"] for c in saved if c.get("load_s") is not None]
        figures.update(checkpoint_save_s=statistics.median(c["save_s"] for c in saved),
                       checkpoint_load_s=loads[-1] if loads else None, checkpoint_bytes=saved[-1]["bytes"])
    if restored:
        figures.update(resumed_after_epochs=restored[-1]["epochs_done"], resume_load_s=restored[-1]["load_s"])
    return figures
