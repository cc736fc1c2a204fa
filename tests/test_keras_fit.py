"""The Keras fit variants against the custom loops they are read against: same model, recipe, input order and
evaluation, so the same parameters, the same losses step by step and exact evaluation; the report sets them
side by side."""
import pytest

from helpers import CPU, bench, rows

PAIRS = {"tf-mirrored-fit": "tf-mirrored", "tf-multiworker-fit": "tf-multiworker"}
# Which Keras each fit runs: Keras 3's fit fails under MultiWorkerMirroredStrategy (keras-team/keras#20585).
KERAS = {"tf-mirrored-fit": "keras 3.", "tf-multiworker-fit": "tf-keras 2."}


# 20-step epochs (the quick task's own at 2 slots are 21), so that fit can run them two steps a call (Keras 2's fit:
# tf-multiworker-fit; tf_impl/knobs.py says why not tf-mirrored-fit's Keras 3).
COMMON = ("--devices", "2", "--task", "quick", "--steps-per-epoch", "20", "--loss-every", "1")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out = tmp_path_factory.mktemp("fit")
    for variant, sets in [*((v, ()) for v in [*PAIRS, *PAIRS.values()]),
                          ("tf-multiworker-fit", ("--set", "steps_per_execution=2"))]:
        done = bench("run", "--variant", variant, *COMMON, *sets, "--out", str(out), env=CPU)
        assert done.returncode == 0, done.stderr
    return out, {(row["variant"], row["task"]["knobs"]): row for row in rows(out)}


@pytest.mark.slow
@pytest.mark.parametrize("fit", PAIRS)
def test_fit_trains_what_the_custom_loop_trains(trained, fit):
    _, by_variant = trained
    row, loop = by_variant[(fit, "")], by_variant[(PAIRS[fit], "")]
    assert row["status"] == "ok", row["error"]
    assert row["world_size"] == 2 and row["environment"]["replicas"] == 2
    assert row["fast_path"]["keras_fit"] and row["keras"].startswith(KERAS[fit])  # which Keras ran
    assert loop["keras"].startswith("keras 3.")
    assert row["eval_samples"] == 397 == loop["eval_samples"]  # digits' test split, every image once
    assert row["memory"]["model_state_bytes"] == loop["memory"]["model_state_bytes"]  # the same variables and slots
    assert row["flops_per_sample"] == loop["flops_per_sample"]
    fit_losses = [loss for _, _, _, loss in row["curves"]["steps"]]
    loop_losses = [loss for _, _, _, loss in loop["curves"]["steps"]]
    assert len(fit_losses) == len(loop_losses) > 40  # every step of the 3 epochs
    # The same first batch on the same weights: the same loss (its summation order aside); then the same steps.
    assert fit_losses[0] == pytest.approx(loop_losses[0], rel=1e-5)
    assert fit_losses == pytest.approx(loop_losses, rel=1e-3)
    assert row["test_accuracy"] == pytest.approx(loop["test_accuracy"], abs=0.01)


@pytest.mark.slow
def test_the_report_reads_fit_against_its_custom_loop(trained):
    out, _ = trained
    assert bench("report", str(out)).returncode == 0
    report = (out / "report.md").read_text()
    section = report.split("### Keras fit against the custom loop")[1].split("###")[0]
    lines = [line for line in section.splitlines() if line.startswith("| tf-")]
    assert [line.split("|")[1].strip() for line in lines] == list(PAIRS)
    assert all("[" in line.split("|")[6] for line in lines)  # the ratio with its interval


@pytest.mark.slow
def test_steps_per_execution_reaches_fit_and_keeps_the_clock_and_the_arithmetic(trained):
    """Two steps a call of fit's compiled function: Keras holds the setting, the clock still times whole windows,
    the loss curve keeps each call's mean, and the training is the same arithmetic as one step a call."""
    _, by_variant = trained
    row, one = by_variant[("tf-multiworker-fit", "steps_per_execution=2")], by_variant[("tf-multiworker-fit", "")]
    assert row["status"] == "ok", row["error"]
    assert (row["fast_path"]["steps_per_execution"], one["fast_path"]["steps_per_execution"]) == (2, 1)
    assert len(row["throughput"]["windows"]) == row["windows"] == one["windows"]
    losses = [loss for _, _, _, loss in row["curves"]["steps"]]
    single = [loss for _, _, _, loss in one["curves"]["steps"]]
    assert len(losses) == len(single) == 60  # 3 epochs of 20 steps
    assert losses[0::2] == losses[1::2]  # a call's two steps share its mean
    assert losses[0::2] == pytest.approx([(a + b) / 2 for a, b in zip(single[0::2], single[1::2])], rel=1e-3)
    assert row["test_accuracy"] == pytest.approx(one["test_accuracy"], abs=0.01)
