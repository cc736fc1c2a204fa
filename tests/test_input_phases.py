"""The input phases (--input-phases): each timed window followed by one on the same batches made resident first,
so that one run measures its input's cost a window apart, its training unchanged."""
import time

import pytest

from bench.results import stats
from bench.worker import StepClock
from helpers import bench, rows

STEP_S, INPUT_S = 0.004, 0.004  # what a step computes and what its input takes, each slept


class Pipeline:
    """An input pipeline whose every batch costs INPUT_S, recording what the clock was doing when asked."""

    def __init__(self, clock: StepClock, batches: int, input_s: float):
        self.clock, self.batches, self.input_s, self.asked = clock, batches, input_s, []

    def __iter__(self):
        for i in range(self.batches):
            self.asked.append((self.clock.timing, self.clock._in_resident))
            time.sleep(self.input_s)
            yield i


def train(clock: StepClock, epochs: int, per_epoch: int, input_s: float = INPUT_S) -> tuple[list[int], list[Pipeline]]:
    trained, pipelines = [], []
    clock.start()
    for _ in range(epochs):
        pipelines.append(Pipeline(clock, per_epoch, input_s))
        for batch in clock.timed(pipelines[-1]):
            time.sleep(STEP_S)
            trained.append(batch)
        clock.pause()
        clock.resume()
    return trained, pipelines


def test_the_pairs_recover_an_input_cost_planted_by_a_known_amount():
    clock = StepClock(warmup=2, window_steps=5, windows=6, samples_per_step=8, sync=lambda: None,
                      resident=lambda batch: batch)
    trained, _ = train(clock, 1, 100)
    assert len(clock.window_seconds) == len(clock.resident_window_seconds) == 6
    phases = stats.paired_ratio(clock.window_seconds, clock.resident_window_seconds)
    planted = STEP_S / (STEP_S + INPUT_S)  # real over resident throughput: the step alone against step + input
    assert abs(phases["real_over_resident"] - planted) < 0.1, phases
    assert phases["ci_low"] <= phases["real_over_resident"] <= phases["ci_high"]
    assert trained == list(range(100))  # the same batches in the same order: training unchanged


def test_the_pipeline_is_never_asked_for_a_batch_inside_a_resident_window():
    """Its batches are drawn before the window opens; inside it nothing asks the pipeline, even where the window
    spans an epoch's end (the rest drawn at the next epoch's start, that time left out of the window)."""
    clock = StepClock(warmup=3, window_steps=4, windows=4, samples_per_step=8, sync=lambda: None,
                      resident=lambda batch: batch)
    slow = 12 * STEP_S  # one batch of it inside a resident window would show above any scheduling noise
    trained, pipelines = train(clock, 4, 9, input_s=slow)  # 9 batches an epoch: windows cross the epochs' ends
    assert clock.done and len(clock.resident_window_seconds) == 4
    assert trained == [i for _ in range(4) for i in range(9)]
    asked = [when for p in pipelines for when in p.asked]
    assert (False, True) in asked  # drawn for a resident window before it opened
    # No resident window holds a batch's input time, not even one drawn to finish it after an epoch's end: its
    # four steps' sleeps, less than one batch's input more.
    assert all(s < 4 * STEP_S + slow for s in clock.resident_window_seconds), clock.resident_window_seconds
    assert all(s >= 4 * (STEP_S + slow) for s in clock.window_seconds)


@pytest.mark.parametrize("together", [1, 2])
def test_a_loop_that_asks_for_its_batches_itself_gets_them_held_and_recovers_the_cost(together):
    """Keras fit's way (tf_impl/fit.py ResidentCalls): each call of `together` steps asks the clock for held
    batches, else takes its own from the pipeline; the pipeline is never asked inside a resident window."""
    clock = StepClock(warmup=2 * together, window_steps=6, windows=6, samples_per_step=8, sync=lambda: None,
                      resident=lambda batch: batch)
    pipeline = Pipeline(clock, 200, INPUT_S)
    batches, trained = iter(pipeline), []
    clock.start()
    while not clock.done:
        held = clock.held(lambda: next(batches), together)
        call = held if held is not None else [next(batches) for _ in range(together)]
        assert len(call) == together
        time.sleep(STEP_S * together)
        trained += call
        clock.steps_done(together)
    assert len(clock.window_seconds) == len(clock.resident_window_seconds) == 6
    assert trained == list(range(len(trained)))  # the same batches in the same order
    assert (True, True) not in pipeline.asked and (False, True) in pipeline.asked  # drawn before, never inside
    phases = stats.paired_ratio(clock.window_seconds, clock.resident_window_seconds)
    assert abs(phases["real_over_resident"] - STEP_S / (STEP_S + INPUT_S)) < 0.1, phases


def test_without_resident_batches_the_clock_is_unchanged():
    clock = StepClock(warmup=2, window_steps=5, windows=3, samples_per_step=8, sync=lambda: None)
    train(clock, 1, 40)
    assert len(clock.window_seconds) == 3 and clock.resident_window_seconds == []
    assert "resident_window_seconds" not in clock.summary()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-ddp", "lightning"])  # DDP's no_sync; Fabric's no_backward_sync
def test_the_phases_leave_training_as_it_was_and_measure_ddps_exposed_communication(tmp_path, variant):
    """DDP on two slots, with and without the phases: the same test loss to the last digit (the resident
    windows train the same batches in the same order; the windows trained with the sync off are undone), and the
    phases' row holds the input's cost and the exposed communication with their intervals."""
    found = {}
    for side, extra in (("phases", ["--input-phases"]), ("plain", [])):
        out = tmp_path / side
        done = bench("run", "--variant", variant, "--devices", "2", "--task", "quick", *extra, "--out", str(out),
                     env={"CUDA_VISIBLE_DEVICES": ""}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        [found[side]] = rows(out)
    assert found["phases"]["test_loss"] == found["plain"]["test_loss"]
    assert found["phases"]["eval_samples"] == found["plain"]["eval_samples"] == 397
    phases = found["phases"]["input_phases"]
    assert found["plain"]["input_phases"] is None
    assert len(phases["pairs"]) == found["phases"]["windows"] >= 3
    communication = phases["communication"]
    assert communication["ci_low"] <= communication["cost"] <= communication["ci_high"] < 1


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["tf-mirrored-fit", "tf-multiworker-fit"])
def test_keras_fit_has_the_phases_and_trains_as_it_did(tmp_path, variant):
    """fit (Keras 3 and Keras 2) fed the resident windows through its train function: the same test loss to the
    last digit as without them, and the row's input cost with its interval."""
    found = {}
    for side, extra in (("phases", ["--input-phases"]), ("plain", [])):
        out = tmp_path / side
        done = bench("run", "--variant", variant, "--devices", "1", "--task", "quick", *extra, "--out", str(out),
                     env={"CUDA_VISIBLE_DEVICES": ""}, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        [found[side]] = rows(out)
    assert found["phases"]["test_loss"] == found["plain"]["test_loss"]
    phases = found["phases"]["input_phases"]
    assert len(phases["pairs"]) == found["phases"]["windows"] >= 3
    assert phases["ci_low"] <= phases["real_over_resident"] <= phases["ci_high"]
