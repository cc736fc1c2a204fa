"""How a rank's DataLoader workers start and end: from a forkserver, never forked from the rank, and gone with it.

A rank runs the process group's and the intra-op pool's threads. A worker forked while one of them holds a lock
gets the lock held and no thread to release it: it waits forever, before it runs a line of Python (the soak's
hang, results/soak-cpu). The forkserver is a fresh single-threaded interpreter a rank, started at the first
`iter()` over a loader with workers; it imports torch, torchvision and the rank's module once, and every worker
forks from it (Python 3.14's default on Linux, for this reason).

A worker's parent is then the server, not the rank, so torch's own check (its parent's pid) no longer ends it
when the rank dies: each worker watches its rank's pid and exits with it, and the server exits once the rank
and the workers, which hold its pipe, are gone.
"""
from __future__ import annotations

import multiprocessing
import os
import select
import sys
import threading
from pathlib import Path

from bench import REPO_ROOT
from bench.worker import stacks

START_METHOD = "forkserver"  # the row records it (fast_path.loader_start)


def context() -> multiprocessing.context.BaseContext:
    """The forkserver context, its server preloading what each worker would otherwise import again."""
    start = multiprocessing.get_context(START_METHOD)
    start.set_forkserver_preload(["torch_impl.files", *filter(None, [main_module()])])
    return start


def main_module() -> str | None:
    """The rank's main module by name, which each worker runs again as __mp_main__ (every dtbench main is
    guarded): `python -m torch_impl.ddp`'s, or a script's under the checkout (`fabric run lightning_impl/train.py`).
    None for another program's main (an engine's worker), and for a package's __main__, which multiprocessing
    never runs again (bench's is the command line)."""
    main = sys.modules["__main__"]
    name = getattr(main.__spec__, "name", None)
    if name is None and getattr(main, "__file__", None):
        path = Path(main.__file__).resolve()
        if path.is_relative_to(REPO_ROOT) and path.suffix == ".py":
            name = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
    return None if name is None or name == "__main__" or name.endswith(".__main__") else name


class WorkerStart:
    """A worker's first steps (its worker_init_fn, pickled to it): answer for its stacks, and end with its rank."""

    def __init__(self):
        self.rank_pid = os.getpid()
        self.register_stacks = stacks.for_started_children()

    def __call__(self, worker_id: int) -> None:
        if self.register_stacks:
            self.register_stacks(worker_id)
        threading.Thread(target=exit_with, args=(self.rank_pid,), daemon=True, name="exit-with-rank").start()


def exit_with(pid: int) -> None:
    """Wait for the process to end (its pidfd turns readable at its exit, before it is reaped), then exit."""
    try:
        rank = os.pidfd_open(pid)
    except ProcessLookupError:
        os._exit(0)
    select.select([rank], [], [])
    os._exit(0)
