"""The StepClock syncs only at window boundaries and excludes warm-up and pauses."""
import os
import time

import pytest

from bench.worker import StepClock


class CountingSync:
    def __init__(self):
        self.calls = 0

    def __call__(self):
        self.calls += 1


def test_syncs_only_at_boundaries_and_collects_k_windows():
    sync = CountingSync()
    clock = StepClock(warmup=3, window_steps=4, windows=2, samples_per_step=10, sync=sync)
    clock.start()
    syncs_after = []
    for _ in range(20):
        clock.step_done()
        syncs_after.append(sync.calls)
    # start, step 1 (startup), end of warm-up (step 3), ends of windows (steps 7 and 11); nothing after.
    assert syncs_after[0] == 2 and syncs_after[2] == 3 and syncs_after[6] == 4 and syncs_after[10] == 5
    assert syncs_after[-1] == 5
    assert len(clock.window_seconds) == 2 and clock.done
    assert clock.summary()["samples_per_window"] == 40


def test_steps_that_end_together_are_counted_each_and_a_boundary_inside_them_is_refused():
    """Keras' steps_per_execution: several steps end in one call back. Boundaries on the last of them time the
    same windows as one step at a time; one inside them would time steps it does not count."""
    sync = CountingSync()
    clock = StepClock(warmup=2, window_steps=4, windows=2, samples_per_step=10, sync=sync)
    clock.start()
    for _ in range(5):
        clock.steps_done(2)
    assert clock.steps == 10 and len(clock.window_seconds) == 2 and clock.done
    assert sync.calls == 5  # start, step 1 (ended inside the first call: in the warm-up), steps 2, 6 and 10

    clock = StepClock(warmup=2, window_steps=4, windows=2, samples_per_step=10, sync=CountingSync())
    clock.start()
    clock.steps_done(2)
    with pytest.raises(ValueError, match="boundary falls at step 6, inside 5 steps"):
        clock.steps_done(5)
    assert clock.steps == 2  # refused before counting any of them
    clock.steps_done(4)
    clock.steps_done(4)
    clock.steps_done(3)  # after the last window, nothing is timed: any count goes
    assert clock.steps == 13 and clock.done


def test_warm_up_is_not_timed():
    clock = StepClock(warmup=2, window_steps=1, windows=1, samples_per_step=1, sync=lambda: None)
    clock.start()
    clock.step_done()
    time.sleep(0.2)  # a slow warm-up step
    clock.step_done()
    clock.step_done()
    assert clock.window_seconds[0] < 0.1


def test_pauses_count_in_no_window_and_no_training_time():
    clock = StepClock(warmup=1, window_steps=2, windows=1, samples_per_step=1, sync=lambda: None)
    clock.start()
    clock.step_done()
    clock.step_done()
    clock.pause()
    time.sleep(0.2)  # evaluation
    clock.resume()
    clock.step_done()
    clock.pause()
    assert clock.window_seconds[0] < 0.1
    assert clock.train_seconds() < 0.1


def test_first_step_is_reported_for_startup_time():
    seen = []
    clock = StepClock(warmup=1, window_steps=1, windows=1, samples_per_step=1, sync=lambda: None,
                      on_first_step=lambda: seen.append("first"))
    clock.start()
    clock.step_done()
    clock.step_done()
    assert seen == ["first"]


def test_zero_warm_up_is_refused():
    with pytest.raises(ValueError, match="warm-up"):
        StepClock(warmup=0, window_steps=1, windows=1, samples_per_step=1, sync=lambda: None)


def test_two_clocks_taking_turns_never_time_at_once():
    """A regression duet: each clock's windows run while the other waits, waits are not timed."""
    import threading

    from bench.worker.turns import Turns, baton

    steps: list[tuple[str, float]] = []
    with baton(first=0) as shared:
        sides = {name: Turns(shared.environment(side)["DTBENCH_TURNS"]) for side, name in enumerate("ab")}
        clocks = {name: StepClock(warmup=1, window_steps=3, windows=4, samples_per_step=1, sync=lambda: None,
                                  turns=turns) for name, turns in sides.items()}

        def train(name: str) -> None:
            clock = clocks[name]
            clock.start()
            while not clock.done:
                time.sleep(0.01 if name == "a" else 0.05)  # b's steps are five times slower
                if clock.timing:
                    steps.append((name, time.perf_counter()))
                clock.step_done()

        threads = [threading.Thread(target=train, args=(name,)) for name in "ab"]
        for thread in threads:
            thread.start()
        threads[0].join()
        shared.release(1)  # a has ended: b must not wait for it after its last window
        threads[1].join(timeout=10)
        assert not threads[1].is_alive()
    owners = "".join(name for name, _ in steps)
    assert owners == "aaabbb" * 4  # whole windows, alternating, a first
    a, b = clocks["a"], clocks["b"]
    # Had a's windows or training time included its waits, they would hold b's slow windows.
    assert max(a.window_seconds) < min(b.window_seconds)
    assert a.train_seconds() < sum(b.window_seconds)


def test_turns_without_a_partner_cost_nothing():
    clock = StepClock(warmup=1, window_steps=1, windows=2, samples_per_step=1, sync=lambda: None)
    clock.start()
    for _ in range(3):
        clock.step_done()
    assert clock.done and len(clock.window_seconds) == 2


def test_every_rank_of_a_duet_run_waits_at_the_same_barriers(monkeypatch):
    """Only rank 0 holds the baton, but all ranks must sync as often, or their barriers mismatch."""
    from bench.worker.turns import TURNS_ENV, Turns, baton

    with baton(first=0) as shared:
        shared.release(0)  # after its first window, rank 0 finds its partner gone and runs free
        monkeypatch.setenv(TURNS_ENV, shared.environment(0)[TURNS_ENV])
        counts = []
        for rank in (0, 1):
            sync = CountingSync()
            clock = StepClock(warmup=1, window_steps=1, windows=3, samples_per_step=1, sync=sync,
                              turns=Turns.from_environment(rank))
            clock.start()
            while not clock.done:
                clock.step_done()
            counts.append(sync.calls)
    plain = CountingSync()
    clock = StepClock(warmup=1, window_steps=1, windows=3, samples_per_step=1, sync=plain)
    clock.start()
    while not clock.done:
        clock.step_done()
    assert counts[0] == counts[1] > plain.calls


def test_a_partner_that_dies_mid_run_is_released_and_one_that_hangs_is_given_up(monkeypatch):
    """A run must not wait forever for a partner that crashed (the coordinator releases it) or
    that keeps the baton (the wait limit): it goes on timing alone."""
    import threading

    from bench.worker import turns

    with turns.baton(first=0) as shared:
        survivor = turns.Turns(shared.environment(1)[turns.TURNS_ENV])
        done = threading.Event()

        def run_alone():
            survivor.take()  # the crashed partner never hands the baton over
            survivor.hand_over()
            done.set()

        thread = threading.Thread(target=run_alone, daemon=True)
        thread.start()
        assert not done.wait(0.3)  # waiting for a baton that is not coming
        shared.release(1)  # the coordinator saw the partner exit
        thread.join(timeout=10)
        assert done.is_set()

    monkeypatch.setattr(turns, "WAIT_LIMIT_S", 0.2)
    with turns.baton(first=0) as shared:
        waiting = turns.Turns(shared.environment(1)[turns.TURNS_ENV])
        assert waiting.partnered
        started = time.monotonic()
        waiting.take()  # side 0 holds the baton and never passes it: given up after the limit
        assert time.monotonic() - started >= 0.2 and not waiting.partnered
        waiting.hand_over()  # from then on it runs alone: no token for the partner, no wait
        partner = os.open(shared.environment(0)[turns.TURNS_ENV].split(",")[0], os.O_RDONLY | os.O_NONBLOCK)
        try:  # side 0's FIFO holds the coordinator's first token only: no second one was handed over
            assert os.read(partner, 16) == turns.YOUR_TURN
        finally:
            os.close(partner)


class FixedOwnTimer:
    """A forward timer that timed `seconds` since each collect."""

    def __init__(self, seconds: float):
        self.seconds, self.collected, self.timing = seconds, 0, False

    def collect(self) -> float:
        self.collected += 1
        return self.seconds


def test_a_ranks_own_time_per_window_is_its_wait_for_batches_and_its_timed_forwards():
    timer = FixedOwnTimer(0.004)
    clock = StepClock(warmup=2, window_steps=2, windows=2, samples_per_step=1, sync=lambda: None, own_timer=timer)
    clock.start()
    clock.input_delay_s = 0.03  # each batch 30 ms late (the "slow" fault), warm-up included
    timing = [timer.timing for _ in clock.timed(range(10))]  # what each step's forward would be timed under
    # Steps 3-6 are the two windows; the warm-up and the steps after the last window are not timed.
    assert timing == [False, False, True, True, True, True, False, False, False, False]
    # Read at every boundary (the warm-up's discarded), kept for the two timed windows: 2 x 30 ms + 4 ms each.
    assert timer.collected == 3
    assert len(clock.own_window_seconds) == 2
    assert all(0.064 <= own < 0.1 for own in clock.own_window_seconds)  # sleeps run long on a busy machine
    assert clock.summary()["own_window_seconds"] == clock.own_window_seconds


def test_without_an_own_timer_no_own_time_is_reported():
    clock = StepClock(warmup=1, window_steps=1, windows=1, samples_per_step=1, sync=lambda: None)
    clock.start()
    for _ in clock.timed(range(3)):
        pass
    assert "own_window_seconds" not in clock.summary()


def test_each_window_keeps_the_cpu_time_it_spent_and_a_pause_spends_none_of_it():
    def spin(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass

    clock = StepClock(warmup=1, window_steps=1, windows=2, samples_per_step=1, sync=lambda: None)
    clock.start()
    clock.step_done()  # warm-up
    spin(0.05)
    clock.step_done()  # a busy window
    time.sleep(0.05)
    clock.pause()
    spin(0.1)  # an evaluation: in no window
    clock.resume()
    clock.step_done()  # an idle window
    busy, idle = clock.window_cpu_seconds
    assert 0.045 <= busy < 0.09 and idle < 0.02
    assert clock.summary()["window_cpu_seconds"] == [busy, idle]
