"""Two live runs that take turns, window by window (duet benchmarking). Standard library only.

On a shared machine the speed drifts by tens of percent within seconds (a neighbour's load, the
host's scheduler), so two runs timed one after the other differ by the drift, not by the code.
Here the two runs are alive at once and one baton passes between them: a run times one window,
hands the baton over and sleeps until it comes back. Adjacent windows of the two runs are a few
milliseconds apart and see the same machine; their ratio is what a regression check compares.

Only one process of each run (global rank 0) holds the baton; the StepClock's barrier keeps that
run's other ranks waiting with it. Waiting is outside every window and outside training time.
"""
from __future__ import annotations

import contextlib
import os
import select
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import subprocess

TURNS_ENV = "DTBENCH_TURNS"  # "MINE,THEIRS": the two FIFOs of this run and of its partner
YOUR_TURN, RUN_FREE = b"t", b"x"  # RUN_FREE: the partner has ended (or died): stop waiting for it
WAIT_LIMIT_S = 600.0  # a partner that keeps the baton longer than this is taken for hung
# What a row timed in a duet says in its notes.
DUET_NOTE = ("timed taking turns with a partner run (a regression duet): compare it with its partner, "
             "not with runs that had the machine to themselves")


class Turns:
    """A run's side of the baton. Without the environment variable every call returns at once.

    Every rank of a run in a duet knows it is in one (`in_duet`), so that all of them wait at the
    same barriers; only the holder (global rank 0) touches the baton.
    """

    def __init__(self, fifos: str | None = None, holder: bool = True):
        self.in_duet = fifos is not None
        mine, theirs = fifos.split(",") if fifos and holder else (None, None)
        # O_RDWR: opening a FIFO never blocks, and a partner that exits does not close it under us.
        self._mine = os.open(mine, os.O_RDWR) if mine else None
        self._theirs = os.open(theirs, os.O_RDWR) if theirs else None

    @property
    def partnered(self) -> bool:
        """This run still takes turns (False: no partner, or the partner has ended or hung)."""
        return self._mine is not None

    @classmethod
    def from_environment(cls, rank: int) -> "Turns":
        return cls(os.environ.get(TURNS_ENV), holder=rank == 0)

    def take(self) -> None:
        """Wait until it is this run's turn (or the partner has gone)."""
        if self._mine is None:
            return
        ready, _, _ = select.select([self._mine], [], [], WAIT_LIMIT_S)
        if not ready or os.read(self._mine, 1) == RUN_FREE:
            self._mine = self._theirs = None  # from now on this run runs alone

    def hand_over(self) -> None:
        """Give the partner its turn and wait for ours."""
        if self._theirs is not None:
            os.write(self._theirs, YOUR_TURN)
        self.take()


class Baton:
    """The coordinator's side: two FIFOs, the baton given to `first`, and a release for each run."""

    def __init__(self, first: int):
        self._dir = Path(tempfile.mkdtemp(prefix="dtbench-turns-"))
        self._paths = [self._dir / "0", self._dir / "1"]
        for path in self._paths:
            os.mkfifo(path)
        # Held open here so that a token written before a run opens its FIFO is not lost.
        self._fds = [os.open(path, os.O_RDWR) for path in self._paths]
        os.write(self._fds[first], YOUR_TURN)

    def environment(self, side: int) -> dict[str, str]:
        return {TURNS_ENV: f"{self._paths[side]},{self._paths[1 - side]}"}

    def release(self, side: int) -> None:
        """The other run has ended: let this one run on without waiting for it."""
        os.write(self._fds[side], RUN_FREE)

    def wait(self, runs: dict[int, subprocess.Popen]) -> None:
        """Wait for both sides' processes; a side that ends frees its partner from waiting for the baton."""
        live = dict(runs)
        while live:
            for side, proc in list(live.items()):
                if proc.poll() is not None:
                    del live[side]
                    self.release(1 - side)
            time.sleep(0.05)

    def close(self) -> None:
        for fd in self._fds:
            os.close(fd)
        for path in self._paths:
            path.unlink(missing_ok=True)
        self._dir.rmdir()


@contextlib.contextmanager
def baton(first: int) -> Iterator[Baton]:
    made = Baton(first)
    try:
        yield made
    finally:
        made.close()
