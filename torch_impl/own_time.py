"""A rank's own time: its forward passes, timed without a sync inside the window (bench.worker.clock.OwnTimer).

The forward pass is the part of a step in which no collective waits for the other ranks (DDP all-reduces in
the backward pass, ZeRO-1/2 in its engine's backward and step), so a rank that is slower
than the others — a shared core, a slower device, a busy host — takes longer there while the rest wait later
in the step. On CUDA a pair of events brackets each forward and is read at the window's boundary, after its
device sync; on a CPU the forward's wall time is the rank's own. Where the forward all-gathers sharded
parameters (FSDP, ZeRO-3) it waits for the others: the loops keep no own time there.
"""
from __future__ import annotations

import contextlib
import time
from typing import Iterator

import torch


class ForwardTimer:
    def __init__(self, device: torch.device):
        self.cuda = device.type == "cuda"
        self._events: list[tuple[torch.cuda.Event, torch.cuda.Event]] = []
        self._seconds = 0.0
        self.timing = False  # set by the clock: inside a window it keeps

    @contextlib.contextmanager
    def span(self) -> Iterator[None]:
        if not self.timing:
            yield
        elif self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            yield
            end.record()
            self._events.append((start, end))
        else:
            began = time.perf_counter()
            yield
            self._seconds += time.perf_counter() - began

    def collect(self) -> float:
        seconds = self._seconds + sum(start.elapsed_time(end) for start, end in self._events) / 1000
        self._events.clear()
        self._seconds = 0.0
        return seconds


_timer: ForwardTimer | None = None  # this process's, from `keep()` on


def keep(device: torch.device) -> ForwardTimer:
    """From now on every `region("forward")` of this process is timed by the timer returned (the clock's)."""
    global _timer
    _timer = ForwardTimer(device)
    return _timer


def span() -> contextlib.AbstractContextManager:
    return _timer.span() if _timer is not None else contextlib.nullcontext()
