"""Folding the records every rank reported (bench.spec.rank_record) into one row: the run's own record here
(whether it adds up, what rank 0 said of its framework and devices, checkpoints, the loss curve, the profile, notes),
each figure's fields by its metric (bench.metrics)."""
from __future__ import annotations

import logging
import statistics
from pathlib import Path

from bench import metrics
from bench.results.jsonl import read_jsonl
from bench.spec.rank_record import (Checkpoint, Epoch, Error, FirstStep, Joined, Loader, Loss, RankRecord, Record,
                                    Restored, Result, SavedModel, UnreadableRecord, Windows, parse)

log = logging.getLogger(__name__)


class FoldError(RuntimeError):
    """The ranks' reports do not add up to a valid measurement."""


def read_rank_records(run_dir: Path) -> dict[int, list[RankRecord]]:
    """Every rank's report, line by line as its records. A line that is no record this dtbench knows is skipped
    with a warning: the run's row is worth more than one line (never raises: it runs while a run is cleaned up)."""
    records: dict[int, list[RankRecord]] = {}
    for path in sorted(run_dir.glob("rank*.jsonl")):
        rank = int(path.stem[4:])
        records[rank] = []
        for line in read_jsonl(path):  # a rank killed mid-write leaves a torn last line
            try:
                records[rank].append(parse(line))
            except UnreadableRecord as exc:
                log.warning("warning: %s holds %s: skipped", path, exc)
    return records


class ResultWatch:
    """Whether every one of `ranks` has recorded its result yet, reading only what each rank's file gained since
    the last look (a run's wait asks several times a second)."""
    MARK = b'{"event": "%s"' % Result.EVENT.encode()  # how Worker.record begins a result's line

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


def of_kind(records: list[RankRecord], kind: type[Record]) -> list[Record]:
    """A rank's records of one kind, in the order it wrote them."""
    return [r for r in records if isinstance(r, kind)]


def first_error(records: dict[int, list[RankRecord]]) -> str | None:
    """The earliest error any rank reported, with the end of its traceback."""
    errors = [e for recs in records.values() for e in of_kind(recs, Error)]
    if not errors:
        return None
    err = min(errors, key=lambda e: e.time)
    tail = err.traceback.strip().splitlines()[-6:]
    return f"rank {err.rank}: {err.error}\n" + "\n".join(tail)


def fold(records: dict[int, list[RankRecord]], planned_world: int, ranks: list[int], launch_time: float) -> dict:
    """Fold the records of the ranks started on this host (rank 0 among them) into one row's fields: the
    metrics' figures (bench.metrics.fold) and the run's own record."""
    joined = {rank: of_kind(records[rank], Joined) for rank in records}
    missing = [rank for rank in ranks if not joined.get(rank)]
    if missing:
        raise FoldError(f"ranks {missing} never joined (expected ranks {ranks[0]}..{ranks[-1]})")
    worlds = {j[-1].world_size for j in joined.values()}
    if worlds != {planned_world}:
        raise FoldError(f"workers joined a world of size {sorted(worlds)} but the plan is {planned_world}: "
                        "the launcher started independent processes instead of one distributed run")
    results = {rank: of_kind(records.get(rank, []), Result) for rank in ranks}
    if not all(results.values()):
        raise FoldError(f"ranks {[r for r, v in results.items() if not v]} finished without a result")
    folded = metrics.Ranks({rank: results[rank][-1] for rank in ranks}, records, planned_world, launch_time)
    main = folded.main

    def events(kind: type[Record]) -> list[Record]:  # rank 0's: the run's own record is kept there
        return folded.events(kind, rank=0)

    info = joined[0][-1]
    if len(main.window_seconds) < 1:
        raise FoldError("no timing window completed")
    return {
        "framework_version": info.framework_version,
        "device_name": info.device_name,
        "threads": info.threads,
        "keras": info.keras,
        **metrics.fold(folded),
        "fast_path": main.fast_path or {},
        **checkpoints(events(Checkpoint), events(Restored)),
        **saved_model(events(SavedModel)),
        "curves": curves(events(Loss), events(Epoch)),
        "profile": profiled(main),
        "notes": [f"{w.timed} of {w.planned} timing windows fit in the {w.steps} steps trained"
                  for w in events(Windows)] + [
            f"{w.workers} loader worker(s) decode on the slot's {w.cores} core(s), beside the training's "
            f"{w.trainer_threads} thread(s)" for w in events(Loader)[-1:]] + [
            f"--mlflow: the model was not saved: {m.error}" for m in events(SavedModel) if m.error],
        # What rank 0 said of its framework and devices (backend, CUDA/NCCL, replicas...), and every rank's cores.
        "worker_info": {**framework_report(info),
                        "cores": {str(r): joined[r][-1].cores for r in sorted(joined)},
                        "cuda_visible": {str(r): joined[r][-1].cuda_visible for r in sorted(joined)},
                        # the device each rank chose from what it could see (bench.worker.gpus)
                        "rank_devices": {str(r): joined[r][-1].device for r in sorted(joined)}},
    }


def framework_report(joined: Joined) -> dict:
    """What a rank said of where it runs beyond the row's own columns: its host's address on a multi-host run, its
    allocator's tunables, and its framework's report of itself and its devices (the row's environment)."""
    address = {"host_addr": joined.host_addr, "interface": joined.interface} if joined.host_addr else {}
    device = {"device": joined.device} if joined.device is not None else {}
    return {**address, "malloc": joined.malloc, **device, **joined.info}


def wall_split(records: dict[int, list[RankRecord]], ranks: list[int], launch_time: float, wall_s: float,
               train_s: float, first_step_s: float | None) -> dict | None:
    """Where a run's wall time went, in seconds that add up to `wall_s`: start-up (launch to the slowest rank's
    first step), training (the clock's time after that step), evaluation and checkpoints (rank 0's, the clock
    paused), the rest of the ranks' lives after their first step (counting FLOPs, saving the model, the
    epoch-end bookkeeping) and teardown (the last rank's result to the end of the harness's wait: processes
    exiting, servers killed, the sampler's file written)."""
    def events(kind: type[Record]) -> list[Record]:
        return [r for rank in ranks for r in of_kind(records.get(rank, []), kind)]

    first_steps, results = [e.time for e in events(FirstStep)], [e.time for e in events(Result)]
    if not first_steps or not results:
        return None
    rank0 = records.get(0, [])
    evaluation = sum(e.eval_s or 0.0 for e in of_kind(rank0, Epoch))
    checkpoints = sum((c.save_s or 0.0) + (c.load_s or 0.0) for c in of_kind(rank0, Checkpoint))
    startup = max(first_steps) - launch_time
    training = max(0.0, train_s - (first_step_s or 0.0))
    teardown = launch_time + wall_s - max(results)
    other = max(results) - max(first_steps) - training - evaluation - checkpoints
    return {"startup": startup, "training": training, "evaluation": evaluation, "checkpoints": checkpoints,
            "other": other, "teardown": teardown}


def profiled(main: Result) -> dict | None:
    """Rank 0's profile (--profile) and profiling's own cost: its windows' step, as the clock timed them, against
    the timed windows' median step."""
    profile = main.profile
    if not profile:
        return None
    step_s = statistics.median(main.window_seconds) / main.window_steps
    clocked_s = sum(main.profiled_window_seconds) / profile["steps"]
    return {**profile, "clocked_step_ms": 1e3 * clocked_s, "unprofiled_step_ms": 1e3 * step_s,
            "overhead": clocked_s / step_s - 1}


def curves(losses: list[Loss], epochs: list[Epoch]) -> dict:
    """Rank 0's loss every few steps and every epoch's evaluation, as the row's loss curves."""
    return {"steps": [[e.step, e.samples, e.train_s, e.loss] for e in losses],
            "epochs": [[e.epoch, e.samples, e.train_s, e.train_loss, e.test_loss, e.test_accuracy] for e in epochs]}


def saved_model(saved: list[SavedModel]) -> dict:
    """--mlflow: what rank 0's save of the trained model wrote (none where it failed: the notes say why)."""
    done = [m for m in saved if not m.error]
    return {"model_bytes": done[-1].bytes, "model_save_s": done[-1].save_s} if done else {}


def checkpoints(saved: list[Checkpoint], restored: list[Restored]) -> dict:
    """Rank 0's checkpoint figures: every rank waits for a save, so rank 0's time is the stall."""
    figures = {}
    if saved:
        loads = [c.load_s for c in saved if c.load_s is not None]
        figures.update(checkpoint_save_s=statistics.median(c.save_s for c in saved),
                       checkpoint_load_s=loads[-1] if loads else None, checkpoint_bytes=saved[-1].bytes)
    if restored:
        figures.update(resumed_after_epochs=restored[-1].epochs_done, resume_load_s=restored[-1].load_s)
    return figures
