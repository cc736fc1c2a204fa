"""Where a hung run waited: on STACKS_SIGNAL every process of a rank (the rank, each child it forks, and each
DataLoader worker, which starts from a forkserver and registers in its worker_init_fn) writes every thread's
Python stack to a file of its own in the run's stacks/ folder.
The harness asks for it just before killing a run that ran past its timeout (bench.run.stacks), and
names the frame each process was in; the files stay in the run folder.

faulthandler writes from its C signal handler, so a process blocked in a collective or on a queue still
answers; a file per process keeps processes that share a log from writing into each other's lines. Each
process adds "PID HOST NAME" to the folder's registry once its handler writes to its own file: the harness
signals only those, never a launcher that catches the signal for its own ends, nor a child forked a moment
ago that would still write into its parent's file.
"""
from __future__ import annotations

import faulthandler
import functools
import os
import signal
import socket
from pathlib import Path
from typing import Callable

STACKS_SIGNAL = signal.SIGUSR1
STACKS_DIR = "stacks"
REGISTRY = "registered"
_target: dict = {}  # the folder and name of this process's file; a forked child names its own after it
_open: list = []  # the files faulthandler writes to must stay open for the process's life


def write_on_signal(run_dir: Path, name: str) -> None:
    """This process answers STACKS_SIGNAL into stacks/<name>.txt, and every child it forks into its own."""
    folder = run_dir / STACKS_DIR
    folder.mkdir(exist_ok=True)
    if not _target:  # one fork hook per process, however many workers it makes (tests, reused engine workers)
        os.register_at_fork(after_in_child=_register_child)
    _target.update(folder=folder, name=name)
    _register(folder, name)


def for_started_children() -> Callable[[int], None] | None:
    """What a child started by a forkserver or by spawn calls to answer STACKS_SIGNAL into a file of its own (no fork
    hook of this process runs in it): a DataLoader's worker_init_fn. None in a process that never registered."""
    if not _target:
        return None
    return functools.partial(_register_started, str(_target["folder"]), _target["name"])


def _register_started(folder: str, name: str, worker_id: int = 0) -> None:
    try:
        _register(Path(folder), f"{name}-child{os.getpid()}")
    except OSError:  # the run's folder is gone (an engine's worker process outlives its run): nothing to say
        pass


def _register_child() -> None:
    _register_started(str(_target["folder"]), _target["name"])


def _register(folder: Path, name: str) -> None:
    file = open(folder / f"{name}.txt", "w")
    faulthandler.register(STACKS_SIGNAL, file=file, all_threads=True)
    for earlier in _open:  # a forked child's copy of its parent's file, or an earlier worker's
        earlier.close()
    _open[:] = [file]
    with open(folder / REGISTRY, "a") as registry:  # one short append: whole lines from every process
        registry.write(f"{os.getpid()} {socket.gethostname()} {name}\n")
