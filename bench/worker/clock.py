"""The StepClock: warm-up, then timing windows bounded by a device sync + barrier. Standard library only."""
from __future__ import annotations

import itertools
import time
from typing import Callable, Iterable, Iterator, Protocol, TypeVar

from bench.worker.turns import Turns

T = TypeVar("T")


class Profiler(Protocol):
    """A framework's profiler over the profiled windows (torch_impl/profile.py, tf_impl/profile.py)."""

    def start(self) -> None: ...

    def mark(self) -> None:
        """Open the profiled span's marker: called after the sync that follows `start`, where the clock's
        window starts, so the span leaves out the wait for the other ranks' profilers to start."""
        ...

    def stop(self, steps: int) -> None:
        """Stop after `steps` profiled steps; write the trace and keep its summary."""
        ...


class Undo(Protocol):
    """What a window trained with gradient synchronisation off changes (weights, optimizer, schedule, random
    state), saved before it and put back after, so that the run trains on as if it had not happened."""

    def save(self) -> None: ...

    def restore(self) -> None: ...


class OwnTimer(Protocol):
    """Times the part of each step in which a rank waits for no other (its forward pass: torch_impl/own_time.py),
    while `timing` (the clock sets it: inside the windows it keeps)."""

    timing: bool

    def collect(self) -> float:
        """Seconds timed since the last call; called after a window boundary's device sync."""
        ...


class StepClock:
    """Times `windows` windows of `window_steps` steps after `warmup` steps.

    `sync` (device synchronise + barrier) is called only at window boundaries,
    at the end of the first step (for startup time) and around pauses; never
    inside a window. Time spent paused (evaluation) counts in no window and in
    no training time. With a `profiler`, `profile_windows` windows after the
    warm-up run under it and are timed apart (`profiled_window_seconds`): the
    timed windows follow them, and starting and stopping the profiler counts in
    no window and no training time. With `turns` (a regression duet) the clock hands the
    machine to a partner run at each boundary, also after the last window so
    that the partner's last window is not shared with this run's evaluation.

    Each timed window also keeps the CPU time this process spent in it, all its threads (`window_cpu_seconds`,
    pauses left out): how busy the host side is.

    With an `own_timer`, each timed window also keeps this rank's own time (`own_window_seconds`): its wait for
    batches and what the timer timed. Window times are equal across ranks (a step all-reduces, a window ends
    in a barrier); a rank's own time is not, so a straggler shows in it.

    With `resident` (input phases), each timed window is followed by a resident one (and the last warm-up step
    trains on one resident batch, so that the resident path's first-call costs are untimed): before it opens, the clock
    draws its batches from the input pipeline and makes each resident on the device (`resident(batch)`), so that
    inside it the steps train on the same batches in the same order with no input work and the pipeline idle (its
    prefetch paused: nothing asks it for a batch). The pairs' ratio is the input's cost, measured in one process a
    window apart (`resident_window_seconds`, paired with `window_seconds` by index); training is unchanged.

    With `unsynced` too (a multi-rank approach that can switch its gradient synchronisation off), the resident
    window's batches are first trained with it off (`discarding` holds meanwhile: the loop steps with its sync off
    and counts nothing), timed (`unsynced_window_seconds`), and undone (`unsynced.restore`); then the resident
    window trains them synchronised. Same batches, same memory, a window apart: their ratio is the communication
    the step leaves exposed. A resident window that spans an epoch's end has no such partner (None).
    """

    def __init__(self, warmup: int, window_steps: int, windows: int, samples_per_step: int,
                 sync: Callable[[], None], on_first_step: Callable[[], None] = lambda: None,
                 on_step: Callable[[int], None] = lambda step: None, turns: Turns | None = None,
                 stop_when_done: bool = False, on_warmup_done: Callable[[], None] = lambda: None,
                 profiler: Profiler | None = None, profile_windows: int = 0, own_timer: OwnTimer | None = None,
                 resident: Callable[[T], T] | None = None, unsynced: Undo | None = None):
        if warmup < 1:
            raise ValueError("at least one warm-up step: the first step compiles and allocates")
        self.warmup, self.window_steps, self.windows = warmup, window_steps, windows
        self.samples_per_step = samples_per_step
        self._sync, self._on_first_step, self._on_step = sync, on_first_step, on_step
        self._on_warmup_done = on_warmup_done
        self._turns = turns or Turns()
        self._stop_when_done = stop_when_done
        self.steps = 0
        self.window_seconds: list[float] = []
        self._profiler, self._profile_windows = profiler, profile_windows if profiler else 0
        self._profiling = False
        self.profiled_window_seconds: list[float] = []
        self._train_seconds = 0.0
        self._running_since: float | None = None
        self._window_start: float | None = None
        self._window_paused = 0.0
        self._paused_at: float | None = None
        self.window_cpu_seconds: list[float] = []
        self._window_cpu_start = 0.0
        self._paused_cpu_at = 0.0
        self.first_step_s: float | None = None  # start to the end of step 1: compilation, allocation
        self.input_wait_s = 0.0                 # inside windows, waiting for the next batch (`timed`)
        self.input_delay_s = 0.0  # the "slow" fault: each batch this much later (bench.worker.faults)
        self._own_timer = own_timer
        self.own_window_seconds: list[float] = []  # per timed window, this rank's own time (with an own_timer)
        self._window_input_wait = 0.0
        self._resident = resident
        self.resident_window_seconds: list[float] = []  # input phases: the window after each timed one, resident
        self._held: list = []       # the resident window's batches, drawn before it opened
        self._to_draw = 0           # batches the resident window still needs drawn (one that spans an epoch's end)
        self._unsynced = unsynced if resident is not None else None
        self.unsynced_window_seconds: list[float | None] = []  # each resident window's unsynchronised partner
        self.discarding = False     # the steps now train with gradient synchronisation off, to be undone
        self._together = 1          # the steps that end together (steps_done): the warm-up's resident call's

    @property
    def timing(self) -> bool:
        return self._window_start is not None

    @property
    def phased(self) -> bool:
        """Its timed windows alternate with resident ones (the input phases)."""
        return self._resident is not None

    @property
    def done(self) -> bool:
        return len(self.window_seconds) >= self.windows and (
            self._resident is None or len(self.resident_window_seconds) >= self.windows)

    @property
    def _in_resident(self) -> bool:
        """The window timing now (or about to open) is a resident one: each timed window is followed by one."""
        return self._resident is not None and len(self.resident_window_seconds) < len(self.window_seconds)

    @property
    def stop(self) -> bool:
        """Training should end now: a run that only needs its windows (an independent run) has them."""
        return self._stop_when_done and self.done

    def timed(self, batches: Iterable[T]) -> Iterator[T]:
        """The batches of one epoch, each followed by `step_done()`; ends early once `stop` holds.
        The time spent waiting for each batch inside a window adds up in `input_wait_s`."""
        batches, exhausted = iter(batches), False
        while True:
            if self._to_draw and not exhausted:
                opening = not self.timing and self.steps >= self.warmup
                exhausted = self._draw(batches)
                if opening and self._unsynced is not None:
                    if len(self._held) == self.window_steps:
                        yield from self._undone(list(self._held))
                    else:
                        self.unsynced_window_seconds.append(None)
            if self._held:  # a resident window's: no input work, no wait
                yield self._held.pop(0)
                self.step_done()
                if self.stop:
                    return
                continue
            if self._to_draw:  # the epoch ended before the resident window had its batches: the next epoch's
                return
            asked = time.perf_counter()
            try:
                batch = next(batches)
            except StopIteration:
                return
            if self.input_delay_s:
                time.sleep(self.input_delay_s)
            if self.timing and not self._profiling:
                waited = time.perf_counter() - asked
                self.input_wait_s += waited
                self._window_input_wait += waited
            yield batch
            self.step_done()
            if self.stop:
                return

    def held(self, draw: Callable[[], T], steps: int = 1) -> list[T] | None:
        """For a loop whose framework asks for its batches itself (Keras fit's train function): the resident batches
        its next call of `steps` steps trains on, drawn first with `draw()` (the pipeline's next batch), the device
        synced and the window opened after, where a resident window is due; None: the call takes its batches from
        the pipeline. The call's steps are then counted with `steps_done`."""
        if self._to_draw:
            self._draw(draw() for _ in itertools.repeat(None))
        if not self._held:
            return None
        taken, self._held = self._held[:steps], self._held[steps:]
        return taken

    def _undone(self, held: list[T]) -> Iterator[T]:
        """The resident window's batches trained with gradient synchronisation off, timed, then undone; the
        resident window itself opens after."""
        self._unsynced.save()
        self._sync()
        started, self.discarding = time.perf_counter(), True
        yield from held
        self._sync()
        self.unsynced_window_seconds.append(time.perf_counter() - started)
        self.discarding = False
        self._unsynced.restore()
        self._sync()
        self._open_window(time.perf_counter())

    def _open_window(self, now: float) -> None:
        self._window_start, self._window_cpu_start = now, time.process_time()

    def _draw(self, batches: Iterator[T]) -> bool:
        """The resident window's batches, drawn and made resident, then the device synced, outside its time: before
        it opens, or (its batches spanning an epoch's end) as a pause inside it. True: the epoch has no more."""
        started, exhausted = time.perf_counter(), False
        while self._to_draw:
            try:
                self._held.append(self._resident(next(batches)))
            except StopIteration:
                exhausted = True
                break
            self._to_draw -= 1
        self._sync()
        if self.timing:
            self._window_paused += time.perf_counter() - started
        elif self.steps >= self.warmup:  # the resident window opens now (a warm-up step's batch: no window)
            self._open_window(time.perf_counter())
        return exhausted

    def start(self) -> None:
        self._sync()
        self._running_since = time.perf_counter()

    def steps_done(self, steps: int) -> None:
        """`steps` steps that ended together (Keras' `steps_per_execution` runs several in one call), each counted.
        A window boundary may fall on the last of them only: inside, the window would time steps it does not count."""
        for ahead in range(1, steps):
            if self._bounds(self.steps + ahead):
                raise ValueError(f"a timing boundary falls at step {self.steps + ahead}, inside {steps} steps that "
                                 f"end together: their count must divide the warm-up ({self.warmup}), the window "
                                 f"({self.window_steps}) and the epoch's steps")
        self._together = steps
        for _ in range(steps):
            self.step_done()

    def _bounds(self, step: int) -> bool:
        """Step `step` ends the warm-up or a window (one still to be timed)."""
        return not self.done and (step == self.warmup or (
            step > self.warmup and (step - self.warmup) % self.window_steps == 0))

    def step_done(self) -> None:
        self.steps += 1
        self._on_step(self.steps)
        if self._resident is not None and self.steps == self.warmup - self._together:
            # The last warm-up step (call of steps that end together) trains on resident batches: whatever the
            # resident path costs once (a compiled function traced and first run for batches already on the device)
            # is paid untimed.
            self._to_draw = self._together
        if self.steps == 1:
            self._sync()
            self.first_step_s = time.perf_counter() - self._running_since
            self._on_first_step()
        if not self._bounds(self.steps):
            return
        self._sync()
        now, cpu = time.perf_counter(), time.process_time()
        timed_one = self.timing
        first_boundary = not timed_one and not self.window_seconds and not self.profiled_window_seconds
        resident = timed_one and self._in_resident
        if timed_one:
            elapsed = now - self._window_start - self._window_paused
            if resident:
                self.resident_window_seconds.append(elapsed)
            else:
                (self.profiled_window_seconds if self._profiling else self.window_seconds).append(elapsed)
            if not self._profiling and not resident:
                self.window_cpu_seconds.append(cpu - self._window_cpu_start)
        if self._own_timer is not None:  # read at every boundary: what the warm-up or a profiled window timed goes
            own = self._window_input_wait + self._own_timer.collect()
            if timed_one and not self._profiling and not resident:
                self.own_window_seconds.append(own)
        self._window_input_wait = 0.0
        self._window_start, self._window_paused = None, 0.0
        if self._turns.in_duet:
            # A partner run times its window now; the wait counts in no window and no training time.
            self._turns.hand_over() if timed_one else self._turns.take()
            self._sync()
            resumed = time.perf_counter()
            self._running_since += resumed - now
            now = resumed
        if not self.done:
            if first_boundary and self._profile_windows:
                now = self._outside_training(now, self._profiler.start)
                self._profiler.mark()
                self._profiling = True
            elif self._profiling and len(self.profiled_window_seconds) == self._profile_windows:
                now = self._outside_training(now, lambda: self._profiler.stop(self._profile_windows * self.window_steps))
                self._profiling = False
                first_boundary = True
            if first_boundary and not self._profiling:
                self._on_warmup_done()  # after the sync, before the first timed window's clock starts
                now = time.perf_counter()
            if self._in_resident and not self._profiling:
                self._to_draw = self.window_steps  # `timed` draws its batches, then opens it
            else:
                self._open_window(now)
        if self._own_timer is not None:  # it times only what a window keeps: nothing piles up after the last one
            self._own_timer.timing = self.timing and not self._profiling

    def _outside_training(self, now: float, action: Callable[[], None]) -> float:
        """Run `action` (the profiler starting or stopping), then sync: its time counts in no training time."""
        action()
        self._sync()
        resumed = time.perf_counter()
        self._running_since += resumed - now
        return resumed

    def pause(self) -> None:
        self._sync()
        self._paused_at, self._paused_cpu_at = time.perf_counter(), time.process_time()
        self._train_seconds += self._paused_at - self._running_since

    def resume(self) -> None:
        self._sync()
        now = time.perf_counter()
        if self.timing:
            self._window_paused += now - self._paused_at
            self._window_cpu_start += time.process_time() - self._paused_cpu_at
        self._running_since, self._paused_at = now, None

    def train_seconds(self) -> float:
        """Training time so far, pauses excluded."""
        if self._paused_at is not None or self._running_since is None:
            return self._train_seconds
        return self._train_seconds + time.perf_counter() - self._running_since

    def summary(self) -> dict:
        return {"window_seconds": self.window_seconds, "window_steps": self.window_steps,
                "samples_per_window": self.samples_per_step * self.window_steps,
                "steps": self.steps, "first_step_s": self.first_step_s, "input_wait_s": self.input_wait_s,
                "window_cpu_seconds": self.window_cpu_seconds,
                **({"profiled_window_seconds": self.profiled_window_seconds} if self._profile_windows else {}),
                **({"own_window_seconds": self.own_window_seconds} if self._own_timer is not None else {}),
                **({"resident_window_seconds": self.resident_window_seconds} if self._resident else {}),
                **({"unsynced_window_seconds": self.unsynced_window_seconds} if self._unsynced else {})}
