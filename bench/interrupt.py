"""Stopping the harness cleanly, and the processes it started with it. SIGINT (Ctrl-C), SIGTERM (a CI runner's cancel) and SIGHUP (the
terminal closed) raise `Interrupted` in the harness's main thread, so that the run in flight is killed
and recorded as `interrupted`; the few steps that must not be torn (appending a row, killing a run's
processes) hold those signals until they are done. Standard library only."""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
from contextlib import contextmanager
from typing import Iterable, Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Interrupted(BaseException):
    """A stop signal arrived. Carries what was in flight (run id, command) and the rows finished before."""

    def __init__(self, signum: int):
        self.signum = signum
        self.name = signal.Signals(signum).name
        super().__init__(f"interrupted by {self.name}")
        self.run_id: str | None = None
        self.command: str | None = None
        self.timeseries: dict | None = None  # what the run did until then (bench.run.sampler)
        self.watchdog = None  # the run's (bench.run.reaper.Reaper), holding its row until the caller stores one
        self.rows: list = []

    @property
    def exit_code(self) -> int:
        """The shell's convention: 128 + the signal (130 for Ctrl-C)."""
        return 128 + self.signum


def stop_on_signals() -> None:
    """From now on a stop signal raises `Interrupted` (a signal ignored by the caller, as under nohup, stays ignored)."""
    def raise_interrupted(signum, frame):
        raise Interrupted(signum)

    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, raise_interrupted)


@contextmanager
def held():
    """Stop signals wait until the block is done, then arrive."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


@contextmanager
def stopped_if_we_stop(procs: Iterable[subprocess.Popen], grace_s: float = 60.0) -> Iterator[None]:
    """A harness that starts other harnesses (a regression duet's sides, a tuning's) and is interrupted, or fails,
    stops them (`procs` as they are by then), each given `grace_s` to record its row as interrupted and stop its
    ranks, rather than leaving them to train on without it."""
    try:
        yield
    except BaseException:
        live = [p for p in procs if p.poll() is None]
        for proc in live:
            proc.terminate()
        for proc in live:
            try:
                proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                proc.kill()  # its own watchdog stops its ranks
        raise


_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def die_with(parent: int, signum: int = signal.SIGKILL):
    def set_parent_death_signal() -> None:  # runs in the child between fork and exec
        _libc.prctl(_PR_SET_PDEATHSIG, signum)
        if os.getppid() != parent:  # the harness died before the line above
            os._exit(1)
    return set_parent_death_signal
