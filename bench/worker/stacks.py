"""Where a hung run waited: on STACKS_SIGNAL every process of a rank (the rank, and each DataLoader worker or
other child it forks) writes every thread's Python stack to a file of its own in the run's stacks/ folder.
The harness asks for it just before killing a run that ran past its timeout (bench.run.processes), and
names the frame each process was in; the files stay in the run folder.

faulthandler writes from its C signal handler, so a process blocked in a collective or on a queue still
answers; a file per process keeps processes that share a log from writing into each other's lines.
"""
from __future__ import annotations

import faulthandler
import os
import signal
from pathlib import Path

STACKS_SIGNAL = signal.SIGUSR1
STACKS_DIR = "stacks"
_open: list = []  # the files faulthandler writes to must stay open for the process's life


def write_on_signal(run_dir: Path, name: str) -> None:
    """This process answers STACKS_SIGNAL into stacks/<name>.txt, and every child it forks into its own."""
    folder = run_dir / STACKS_DIR
    folder.mkdir(exist_ok=True)
    _register(folder / f"{name}.txt")
    os.register_at_fork(after_in_child=lambda: _register(folder / f"{name}-child{os.getpid()}.txt"))


def _register(path: Path) -> None:
    _open.append(open(path, "w"))
    faulthandler.register(STACKS_SIGNAL, file=_open[-1], all_threads=True)
