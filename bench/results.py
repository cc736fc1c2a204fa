"""The result row: its schema, folding per-rank reports into it, the store, the environment."""
from __future__ import annotations

import csv
import dataclasses
import fcntl
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench import stats
from bench.worker import cpu_model

STATUSES = ("ok", "failed", "timeout", "skipped")
LIBRARIES = ("torch", "torchvision", "timm", "accelerate", "tensorflow", "tensorflow-cpu", "keras",
             "numpy", "pandas")


@dataclass
class ResultRow:
    run_id: str
    started_at: str
    status: str
    variant: str
    framework: str
    launcher: str
    device_type: str
    nodes: int
    devices_per_node: int
    world_size: int
    task: dict
    error: str | None = None
    framework_version: str | None = None
    engine: str = "local"
    device_name: str | None = None
    threads: int | None = None
    oversubscribed: bool = False
    command: str | None = None
    warmup_steps: int | None = None
    window_steps: int | None = None
    windows: int | None = None
    throughput: dict | None = None          # median, ci_low, ci_high, ci_coverage, windows (samples/s)
    per_device_throughput: float | None = None
    step_time_ms: dict | None = None        # median, p90
    startup_s: float | None = None
    train_s: float | None = None
    wall_s: float | None = None
    epochs: int | None = None
    test_accuracy: float | None = None
    test_loss: float | None = None
    eval_samples: int | None = None
    time_to_accuracy_s: float | None = None
    peak_memory_mb: float | None = None
    scaling_efficiency: float | None = None             # vs the same variant's 1-device run
    scaling_efficiency_vs_single: float | None = None   # vs the framework's plain single-device loop
    independent: bool = False                           # gradient synchronisation off: the no-communication bound
    notes: list[str] = field(default_factory=list)
    git_sha: str | None = None
    host: str | None = None
    environment: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "ResultRow":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def display_name(r: ResultRow) -> str:
    """How tables and plots name a row's series: variant, (no sync), [engine] when not the own launcher."""
    engine = f" [{r.engine}]" if r.engine not in ("local", "torchrun") else ""
    return r.variant + (" (no sync)" if r.independent else "") + engine


_ROW_FIELDS_FROM_JOIN = {"event", "rank", "time", "world_size", "local_rank", "node_rank", "pid", "host", "cores",
                         "cuda_visible", "framework_version", "device_name", "threads"}


class FoldError(RuntimeError):
    """The ranks' reports do not add up to a valid measurement."""


def read_rank_records(run_dir: Path) -> dict[int, list[dict]]:
    records: dict[int, list[dict]] = {}
    for path in sorted(run_dir.glob("rank*.jsonl")):
        rank = int(path.stem[4:])
        lines = [line for line in path.read_text().splitlines() if line.strip()]
        records[rank] = [json.loads(line) for line in lines]
    return records


def first_error(records: dict[int, list[dict]]) -> str | None:
    """The earliest error any rank reported, with the end of its traceback."""
    errors = [r for recs in records.values() for r in recs if r["event"] == "error"]
    if not errors:
        return None
    err = min(errors, key=lambda r: r["time"])
    tail = err.get("traceback", "").strip().splitlines()[-6:]
    return f"rank {err['rank']}: {err['error']}\n" + "\n".join(tail)


def fold(records: dict[int, list[dict]], planned_world: int, ranks: list[int], launch_time: float) -> dict:
    """Fold the JSON lines of the ranks started on this host (rank 0 among them) into one row's figures."""
    def events(rank: int, name: str) -> list[dict]:
        return [r for r in records.get(rank, []) if r["event"] == name]

    joined = {rank: events(rank, "joined") for rank in records}
    missing = [rank for rank in ranks if not joined.get(rank)]
    if missing:
        raise FoldError(f"ranks {missing} never joined (expected ranks {ranks[0]}..{ranks[-1]})")
    worlds = {j[-1]["world_size"] for j in joined.values()}
    if worlds != {planned_world}:
        raise FoldError(f"workers joined a world of size {sorted(worlds)} but the plan is {planned_world}: "
                        "the launcher started independent processes instead of one distributed run")
    results = {rank: events(rank, "result") for rank in ranks}
    if not all(results.values()):
        raise FoldError(f"ranks {[r for r, v in results.items() if not v]} finished without a result")
    main = results[0][-1]
    info = joined[0][-1]
    if len(main["window_seconds"]) < 1:
        raise FoldError("no timing window completed")
    throughput = stats.throughput_summary(main["window_seconds"], main["samples_per_window"])
    first_steps = [e["time"] for rank in ranks for e in events(rank, "first_step")]
    return {
        "framework_version": info.get("framework_version"),
        "device_name": info.get("device_name"),
        "threads": info.get("threads"),
        "throughput": throughput,
        "per_device_throughput": throughput["median"] / planned_world,
        "step_time_ms": stats.step_time_ms(main["window_seconds"], main["window_steps"]),
        # Startup ends when the slowest rank has finished its first step.
        "startup_s": max(first_steps) - launch_time if first_steps else None,
        "train_s": main["train_s"],
        "epochs": main.get("epochs"),
        "test_accuracy": main.get("test_accuracy"),
        "test_loss": main.get("test_loss"),
        "eval_samples": main.get("eval_samples"),
        "time_to_accuracy_s": main.get("time_to_accuracy_s"),
        "peak_memory_mb": max(results[r][-1]["peak_memory_mb"] for r in results),
        # What rank 0 said of its framework and devices (backend, CUDA/NCCL, replicas...), and every rank's cores.
        "params": main.get("params"),
        "worker_info": {**{k: v for k, v in info.items() if k not in _ROW_FIELDS_FROM_JOIN},
                        "cores": {str(r): joined[r][-1]["cores"] for r in sorted(joined)},
                        "cuda_visible": {str(r): joined[r][-1].get("cuda_visible") for r in sorted(joined)}},
    }


# ---------------------------------------------------------------- the store

class ResultStore:
    """Append-only JSON lines (+ a CSV export). Earlier rows are never rewritten."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.jsonl = self.directory / "results.jsonl"
        self.csv = self.directory / "results.csv"

    def append(self, row: ResultRow) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        line = (json.dumps(row.to_dict(), default=str) + "\n").encode()
        # One O_APPEND write under an exclusive lock: concurrent sweeps never interleave.
        fd = os.open(self.jsonl, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.write(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
        self.export_csv()

    def rows(self) -> list[ResultRow]:
        if not self.jsonl.exists():
            return []
        lines = self.jsonl.read_text().splitlines()
        return [ResultRow.from_dict(json.loads(line)) for line in lines if line.strip()]

    def export_csv(self) -> None:
        rows = [flatten(r.to_dict()) for r in self.rows()]
        if not rows:
            return
        columns = list(dict.fromkeys(k for row in rows for k in row))
        tmp = self.csv.with_suffix(f".csv.tmp{os.getpid()}")
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=columns)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self.csv)

    def baseline_throughput(self, row: ResultRow, variant: str | None = None) -> float | None:
        """The latest ok 1-device throughput of `variant` (default: the row's own) on the same task and device type."""
        for old in reversed(self.rows()):
            if (old.status == "ok" and old.variant == (variant or row.variant) and old.world_size == 1
                    and old.device_type == row.device_type and not old.independent
                    and (variant is not None or old.engine == row.engine)  # baselines have no engine
                    and same_task(old.task, row.task) and old.throughput):
                return old.throughput["median"]
        return None


def same_task(a: dict, b: dict) -> bool:
    # The per-device batch is derived from the world size under strong scaling; everything else must match.
    ignore = {"per_device_batch", "params"}
    return {k: v for k, v in a.items() if k not in ignore} == {k: v for k, v in b.items() if k not in ignore}


def flatten(data: dict, prefix: str = "") -> dict:
    """Nested dicts -> dotted columns; lists as JSON text (for the CSV export)."""
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


# ---------------------------------------------------------------- environment

def _gpu_details() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    lines = [line.split(",") for line in out.stdout.strip().splitlines() if "," in line]
    if out.returncode != 0 or not lines:
        return {}
    return {"gpu_model": lines[0][0].strip(), "gpu_count": len(lines), "driver": lines[0][1].strip()}


def git_sha(repo: Path) -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                               capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def environment() -> dict:
    """Versions and hardware, gathered without importing any framework."""
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = importlib.metadata.version(lib)
        except importlib.metadata.PackageNotFoundError:
            pass
    return {"python": platform.python_version(), "os": platform.platform(), "cpu_model": cpu_model(),
            "cpu_count": os.cpu_count(), "cores_available": len(os.sched_getaffinity(0)),
            "libraries": versions, **_gpu_details()}


def host() -> str:
    return socket.gethostname()
