"""The training recipe: the same learning rate at every step in torch (its optimizers and lr_schedulers)
and TensorFlow (Keras optimizers and schedules), read from each framework's own optimizer as it steps;
and what weak scaling does to the batch and the rate."""
import json
import subprocess
import sys

import pytest

from bench.spec.task import SpecError, get_task
from helpers import REPO

STEPS_PER_EPOCH, EPOCHS = 10, 3

# One weight, a gradient that depends on it and on the step: the rate each step, then the weight after it.
TORCH = """
import json, sys, torch
from bench.spec.task import TaskSpec
from torch_impl.recipe import make_optimizer, make_scheduler
spe, epochs = int(sys.argv[2]), int(sys.argv[3])

def trajectory(task):
    model = torch.nn.Linear(1, 1, bias=False)
    torch.nn.init.constant_(model.weight, 1.0)
    optimizer = make_optimizer(model, task)
    scheduler = make_scheduler(optimizer, task, spe, epochs)
    rates, weights = [], []
    for step in range(spe * epochs):
        rates.append(optimizer.param_groups[0]["lr"])
        model.weight.grad = 0.5 * model.weight.detach() + 0.1 * (step % 7) - 0.2
        optimizer.step()
        scheduler.step()
        weights.append(model.weight.item())
    return rates, weights

print(json.dumps([trajectory(TaskSpec.from_dict(task)) for task in json.loads(sys.argv[1])]))
"""

TENSORFLOW = """
import json, sys
import tensorflow as tf
from tf_impl.keras_flavour import LEGACY, keras
from bench.spec.task import TaskSpec
from tf_impl.recipe import make_optimizer
spe, epochs = int(sys.argv[2]), int(sys.argv[3])

def rate(optimizer):
    if not LEGACY:
        return float(optimizer.learning_rate)
    # Keras 2's `learning_rate` is the rate its last step took: read the schedule at the coming step.
    schedule = optimizer._learning_rate
    return float(schedule(optimizer.iterations) if callable(schedule) else schedule)

def trajectory(task):
    optimizer = make_optimizer(task, spe, epochs)
    weight = tf.Variable([[1.0]]) if LEGACY else keras.Variable([[1.0]])
    rates, weights = [], []
    for step in range(spe * epochs):
        rates.append(rate(optimizer))
        optimizer.apply_gradients([(0.5 * weight + 0.1 * (step % 7) - 0.2, weight)])
        weights.append(float(weight.numpy()[0][0]))
    return rates, weights

print(json.dumps([trajectory(TaskSpec.from_dict(task)) for task in json.loads(sys.argv[1])]))
"""

RECIPES = {
    "sgd constant": dict(),
    "sgd weight decay, cosine": dict(weight_decay=0.05, schedule="cosine"),
    "adam weight decay": dict(optimizer="adam", lr=0.01, weight_decay=0.05),
    "sgd weak x4, warm-up": dict(scaling="weak", world=4),
    "adamw step": dict(optimizer="adamw", lr=0.01, weight_decay=0.01, schedule="step", lr_gamma=0.5),
    "adam cosine, warm-up": dict(optimizer="adam", lr=0.01, schedule="cosine", warmup_epochs=1.0),
    "sgd cosine": dict(schedule="cosine"),
    "sgd step every 2, warm-up 0.5": dict(schedule="step", lr_step_epochs=2, warmup_epochs=0.5),
}


def tasks() -> list[dict]:
    """Each recipe's task, in RECIPES' order: its changes to the quick task, at its world size."""
    found = []
    for changes in map(dict, RECIPES.values()):
        world = changes.pop("world", 1)
        found.append(get_task("quick", epochs=EPOCHS, **changes).for_world(world).to_dict())
    return found


def trajectories(script: str, env: dict | None = None) -> dict[str, tuple[list[float], list[float]]]:
    """Every recipe's rates and weights, by name, from one process of the framework (its start is most of it)."""
    out = subprocess.run([sys.executable, "-c", script, json.dumps(tasks()), str(STEPS_PER_EPOCH), str(EPOCHS)],
                         cwd=REPO, capture_output=True, text=True, timeout=300, env={"PYTHONPATH": str(REPO),
                                                                                     "TF_CPP_MIN_LOG_LEVEL": "3",
                                                                                     "CUDA_VISIBLE_DEVICES": "",
                                                                                     **(env or {})})
    assert out.returncode == 0, out.stderr[-2000:]
    return dict(zip(RECIPES, json.loads(out.stdout.strip().splitlines()[-1])))


# Keras 3, and Keras 2 (tf-keras) as tf-multiworker-fit's launch selects it.
KERAS = {"keras 3": {}, "keras 2": {"TF_USE_LEGACY_KERAS": "1"}}


@pytest.fixture(scope="module")
def torch_trained():
    return trajectories(TORCH)


@pytest.fixture(scope="module")
def tf_trained():
    return {flavour: trajectories(TENSORFLOW, env) for flavour, env in KERAS.items()}


@pytest.mark.slow
@pytest.mark.parametrize("keras", KERAS)
@pytest.mark.parametrize("name", RECIPES)
def test_torch_and_tensorflow_train_the_same_recipe_step_by_step(name, keras, torch_trained, tf_trained):
    """The same learning rate at every step, and the same weight after it (the optimizers' updates, weight
    decay and momentum under a changing rate included), read from each framework's optimizer."""
    (torch_rates, torch_weights), (tf_rates, tf_weights) = torch_trained[name], tf_trained[keras][name]
    assert len(torch_rates) == len(tf_rates) == STEPS_PER_EPOCH * EPOCHS
    assert tf_rates == pytest.approx(torch_rates, rel=1e-5, abs=1e-9)
    assert tf_weights == pytest.approx(torch_weights, rel=1e-4, abs=1e-6)
    if name.endswith("warm-up"):  # the warm-up really climbs: from the unscaled rate (or a tenth) to the peak
        assert torch_rates[0] < torch_rates[STEPS_PER_EPOCH] and len(set(torch_rates[:5])) == 5


def test_weak_scaling_multiplies_the_batch_and_the_rate_with_a_warm_up():
    task = get_task("default", scaling="weak").for_world(4)
    assert (task.recipe.global_batch, task.recipe.per_device_batch, task.recipe.lr_scale, task.peak_lr) == (512, 128, 4.0, 0.2)
    assert task.effective_warmup_epochs == 0.5 and task.warmup_start_factor == 0.25  # from the one-device rate
    one = get_task("default", scaling="weak").for_world(1)
    assert (one.recipe.global_batch, one.recipe.lr_scale, one.effective_warmup_epochs) == (128, 1.0, 0.0)
    assert get_task("default", scaling="weak", per_device_batch=64).for_world(2).recipe.global_batch == 128
    assert get_task("default", scaling="weak", lr_scaling="none").for_world(4).peak_lr == 0.05


def test_strong_scaling_keeps_the_global_batch_and_the_rate():
    task = get_task("default", scaling="strong").for_world(4)
    assert (task.recipe.global_batch, task.recipe.lr_scale) == (128, 1.0)


@pytest.mark.parametrize("changes, message", [
    (dict(per_device_batch=64), "goes with --scaling weak"),
    (dict(warmup_epochs=5.0), "fewer than the 2 epochs"),
    (dict(lr_gamma=0.0), "--lr-gamma in"),
    (dict(optimizer="lamb"), "unknown optimizer"),
])
def test_bad_recipes_are_refused(changes, message):
    with pytest.raises(SpecError, match=message):
        get_task("default", **changes)
