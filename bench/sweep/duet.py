"""Two runs of one approach in a tuning, paired: a duet that takes turns window by window (bench.worker.turns), so
that window i of each run is timed milliseconds from the other's and the machine's drift hits both alike; where two
runs cannot be alive at once, one after the other (interleaved, who goes first alternating), which pairs the runs but
not their windows.

Each side of a duet is its own harness process (`python -m bench.sweep.duet SPEC OUT ROW`): the turn-taking reaches a
run's ranks through their environment, which one harness cannot give two concurrent runs apart. The sides write their
rows to the tuning's store themselves (an interrupted run's too) and to files the tuning reads back.
"""
from __future__ import annotations

import json
import math
import os
import pickle
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import REPO_ROOT
from bench.results import ResultRow, ResultStore
from bench import interrupt
from bench.run.runspec import RunSpec
from bench.spec.devices import Machine
from bench.status import Status
from bench.worker import turns

TURNS, INTERLEAVED = "turns", "interleaved"


def log_ratio(reference: ResultRow, candidate: ResultRow) -> float | None:
    """log(candidate / reference) for one pair: the median of the paired windows' log ratios (window i over window
    i, as `bench regress` judges a duet); None where either run has no windows."""
    ref, cand = ((row.throughput or {}).get("windows") if row.status == Status.OK else None
                 for row in (reference, candidate))
    if not ref or not cand or len(ref) != len(cand):
        return None
    return statistics.median(math.log(b / a) for a, b in zip(ref, cand))


def play(specs: tuple[RunSpec, RunSpec], out: Path, machine: Machine, first: int, pairing: str) -> list[ResultRow]:
    """The two runs' rows, in the order of `specs`: started together taking turns (`first` holds the baton), or
    with INTERLEAVED one after the other (`first` runs first)."""
    with tempfile.TemporaryDirectory(prefix="dtbench-duet-") as temp:
        folder = Path(temp)
        order = (first, 1 - first)
        procs: dict[int, subprocess.Popen] = {}
        with interrupt.stopped_if_we_stop(procs.values()):
            if pairing == INTERLEAVED:
                for side in order:
                    procs[side] = _side(specs[side], out, machine, folder / str(side), {})
                    procs[side].wait()
            else:
                with turns.baton(first) as baton:
                    for side in order:
                        procs[side] = _side(specs[side], out, machine, folder / str(side), baton.environment(side))
                    baton.wait(procs)
        return [_row(folder / str(side)) for side in (0, 1)]


def _side(spec: RunSpec, out: Path, machine: Machine, folder: Path, env: dict[str, str]) -> subprocess.Popen:
    folder.mkdir()
    (folder / "spec.pickle").write_bytes(pickle.dumps((spec, machine, out.resolve())))
    with open(folder / "harness.log", "wb") as log:
        # SIGTERM if the tuning dies first: the side records its run as interrupted and stops its ranks.
        return subprocess.Popen([sys.executable, "-m", "bench.sweep.duet", str(folder)], cwd=REPO_ROOT,
                                env={**os.environ, "PYTHONPATH": str(REPO_ROOT), **env}, stdout=log,
                                stderr=subprocess.STDOUT, preexec_fn=interrupt.die_with(os.getpid(), signal.SIGTERM))


def _row(folder: Path) -> ResultRow:
    path = folder / "row.json"
    if not path.exists():  # the side's harness itself failed: its log's last line is why
        lines = (folder / "harness.log").read_text(errors="replace").strip().splitlines() or ["no output"]
        raise RuntimeError(f"a duet's side stopped before its run was recorded: {lines[-1]}")
    return ResultRow.from_dict(json.loads(path.read_text()))


def main(folder: Path) -> None:
    """One side: its run executed and stored as a sweep's would be (an interrupted one's row too), its row also
    written for the tuning to read."""
    from bench.interrupt import stop_on_signals
    from bench.run import environment
    from bench.run.execute import execute
    from bench.worker import data

    stop_on_signals()
    spec, machine, out = pickle.loads((folder / "spec.pickle").read_bytes())
    row = execute(spec, out, machine, data.prepare(spec.task), environment.environment(), store=ResultStore(out))
    (folder / "row.json").write_text(json.dumps(row.to_dict()))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
