"""The StepClock syncs only at window boundaries and excludes warm-up and pauses."""
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
