"""A history of CI results read into series: one a configuration, metric and machine, one point a commit.

Two sources. A folder of per-commit results folders as a CI job keeps them (each `bench regress --out` folder: its
`current/` rows are the commit's, its verdict.json the A/B duets against the commit before; or any results folder,
`bench run`'s or `bench sweep`'s), or github-action-benchmark's history file (data.js, or the same JSON), whose
entries `bench regress` wrote. The commits are ordered by git where the working directory's repository knows them
all (a commit run again later stays in its place), else by when each was first run. A machine is what the rows say
of the hardware (CPU model, cores, GPU model and count), not the host name, which an ephemeral runner changes every
job; its change ends one series and starts another, so it is never read as a change point."""
from __future__ import annotations

import json
import math
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bench.regress.compare import ACCURACY, METRICS, Metric, load, machine_label
from bench.results import ResultRow
from bench.results.key import settings_differ
from bench.spec.task import SpecError
from bench.status import Status

ALL_METRICS: dict[str, Metric] = {m.name: m for m in (*METRICS, ACCURACY)}


@dataclass(frozen=True)
class Point:
    """One commit's figure: the median of its runs (the runs kept for the page), and where `--against` ran, the
    duets' geometric-mean ratio against the commit before with its per-duet range."""
    commit: str
    values: tuple[float, ...]
    duet_ratio: float | None = None
    duet_range: tuple[float, float] | None = None

    @property
    def value(self) -> float:
        return statistics.median(self.values)


@dataclass
class Series:
    config: str
    metric: Metric
    machine: str
    points: list[Point] = field(default_factory=list)

    @property
    def name(self) -> str:
        return f"{self.config} {self.metric.name} on {self.machine}"


@dataclass
class History:
    source: Path
    series: list[Series]
    commits: list[str]  # every commit read, in order


def _commit_order(commits: list[str], first_seen: dict[str, str]) -> list[str]:
    """Git's order where this repository knows every commit (oldest first); else the order they first ran in."""
    listed = subprocess.run(["git", "rev-list", "--topo-order", "--reverse", *commits], capture_output=True,
                            text=True)
    if listed.returncode == 0:
        position = {sha: i for i, sha in enumerate(listed.stdout.split())}
        full = {c: next((s for s in position if s.startswith(c)), None) for c in commits}
        if all(full.values()):
            return sorted(commits, key=lambda c: position[full[c]])
    return sorted(commits, key=lambda c: first_seen[c])


def _duets(folder: Path) -> dict[tuple[str, str], tuple[float, tuple[float, float] | None]]:
    """(configuration, metric) -> the A/B's ratio and per-duet range, from a `regress --against` verdict.json."""
    path = folder / "verdict.json"
    if not path.exists():
        return {}
    verdict = json.loads(path.read_text())
    if not verdict.get("duets"):
        return {}
    found = {}
    for v in verdict.get("verdicts", []):
        if v.get("ratio") is None:
            continue
        low_high = v.get("interval", "").removeprefix("ratio ").split("..")
        span = (float(low_high[0]), float(low_high[1])) if len(low_high) == 2 else None
        found[(v["key"], v["metric"])] = (v["ratio"], span)
    return found


def read_folders(root: Path) -> History:
    """Every results folder under ROOT (a `regress --out` folder's `current/`, or the folder itself), and ROOT's
    own rows if it is a results folder too."""
    folders = sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []
    rows_by_commit: dict[str, list[ResultRow]] = {}
    duets_by_commit: dict[str, dict] = {}
    for folder in [root, *folders]:
        store = folder / "current" if (folder / "current").is_dir() else folder
        if not (store / "results.jsonl").exists():
            continue
        for row in load(store):
            if row.status != Status.OK:
                continue
            commit = row.git_sha or folder.name
            rows_by_commit.setdefault(commit, []).append(row)
            if folder is not root:
                duets_by_commit.setdefault(commit, {}).update(_duets(folder))
    if not rows_by_commit:
        raise SpecError(f"{root}: no finished rows in it or its folders: point at a folder of per-commit results "
                        "folders (each a `bench regress --out` or a results folder) or a github-action-benchmark "
                        "data.js")
    first_seen = {c: min(r.started_at for r in rows) for c, rows in rows_by_commit.items()}
    commits = _commit_order(list(rows_by_commit), first_seen)
    _check_one_task_per_configuration(rows_by_commit, commits)
    series: dict[tuple[str, str, str], Series] = {}
    for commit in commits:
        rows = rows_by_commit[commit]
        for config in sorted({r.key.label for r in rows}):
            runs = [r for r in rows if r.key.label == config]
            machine = machine_label(runs)
            for metric in ALL_METRICS.values():
                values = tuple(v for v in (metric.value(r) for r in runs) if v is not None and math.isfinite(v))
                if not values:
                    continue
                ratio, span = duets_by_commit.get(commit, {}).get((config, metric.name), (None, None))
                series.setdefault((config, metric.name, machine), Series(config, metric, machine)).points.append(
                    Point(commit, values, ratio, span))
    return History(root, list(series.values()), commits)


def _check_one_task_per_configuration(rows_by_commit: dict[str, list[ResultRow]], commits: list[str]) -> None:
    """A configuration whose task settings change between commits measures two things: refuse it."""
    first: dict[str, tuple[str, ResultRow]] = {}
    for commit in commits:
        for row in rows_by_commit[commit]:
            label = row.key.label
            if label not in first:
                first[label] = (commit, row)
                continue
            seen_at, seen = first[label]
            differ = settings_differ(seen.task, row.task)
            if differ:
                name = differ[0]
                raise SpecError(f"{label}: rows from mixed tasks ({name} {seen.task.get(name)!r} at {seen_at[:10]}, "
                                f"{row.task.get(name)!r} at {commit[:10]}): keep one task's rows a history, or "
                                "start a new history folder where the task changed")


def read_benchmark_action(path: Path) -> History:
    """github-action-benchmark's history: {suite: [{commit: {id, timestamp}, date, benches: [{name, value, unit,
    extra}]}]}. A bench `bench regress` wrote is named "CONFIGURATION METRIC"; its extra names the machine; without
    it the suite (the action's `name`, one a runner) is the machine."""
    text = path.read_text()
    try:
        data = json.loads(text[text.index("{"):text.rindex("}") + 1])
    except ValueError as exc:
        raise SpecError(f"{path}: not github-action-benchmark's data.js ({exc}): point at its data.js, or at a "
                        "folder of per-commit results folders") from None
    entries = data.get("entries", data) if isinstance(data, dict) else {}
    series: dict[tuple[str, str, str], Series] = {}
    first_seen: dict[str, str] = {}
    points: dict[tuple[str, str, str], dict[str, list[float]]] = {}
    for suite, runs in (entries.items() if isinstance(entries, dict) else []):
        for run in runs if isinstance(runs, list) else []:
            commit = (run.get("commit") or {}).get("id")
            if not commit:
                continue
            first_seen.setdefault(commit, str(run.get("date", "")).zfill(16))
            for bench in run.get("benches", []):
                config, _, metric_name = str(bench.get("name", "")).rpartition(" ")
                metric = ALL_METRICS.get(metric_name)
                if metric is None or not config or not isinstance(bench.get("value"), (int, float)):
                    continue
                extra = str(bench.get("extra", ""))
                machine = extra.split("; machine ", 1)[1].split(";")[0] if "; machine " in extra else suite
                key = (config, metric.name, machine)
                series.setdefault(key, Series(config, metric, machine))
                points.setdefault(key, {}).setdefault(commit, []).append(float(bench["value"]))
    if not first_seen or not points:
        raise SpecError(f"{path}: no `bench regress` entries in it (benches named 'CONFIGURATION METRIC'): point "
                        "at the data.js github-action-benchmark keeps for dtbench's output")
    commits = _commit_order(list(first_seen), first_seen)
    for key, s in series.items():
        s.points = [Point(c, tuple(points[key][c])) for c in commits if c in points[key]]
    return History(path, list(series.values()), commits)


def read(source: Path) -> History:
    if not source.exists():
        raise SpecError(f"{source}: no such file or folder: point at a folder of per-commit results folders or a "
                        "github-action-benchmark data.js")
    history = read_benchmark_action(source) if source.is_file() else read_folders(source)
    if len(history.commits) < 2:
        raise SpecError(f"{source}: one commit ({history.commits[0][:10]}) is no history: change points need the "
                        "results of several commits (keep each CI run's folder)")
    return history
