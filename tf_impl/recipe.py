"""The training recipe through Keras' own API: its optimizers (SGD and Adam taught torch's update and
weight decay, so that both frameworks train the same recipe), with a `LearningRateSchedule` read at
`optimizer.iterations` (one step per optimizer step).

The same schedule as torch's schedulers (torch_impl/recipe.py), from Keras' pieces: a linear warm-up
from `warmup_start_factor x peak` to the peak, then constant, `ExponentialDecay(staircase=True)` (x lr_gamma
every lr_step_epochs) or `CosineDecay` (to 0 at the last step, its own `warmup_target` warm-up). A test
holds the two equal step by step, under Keras 3 and under Keras 2 (tf_impl/keras_flavour.py): Keras 2 calls
`update_step(gradient, variable)` with the rate on the optimizer, and its optimizers have no `assign` or
`_get_variable_index` of their own (`_Keras2Updates` spells them).
"""
from __future__ import annotations

import tensorflow as tf

from bench.spec.task import TaskSpec
from tf_impl.keras_flavour import LEGACY, keras, ops


class _Keras2Updates:
    """What Keras 3's optimizers offer the update steps below, on Keras 2's (none under Keras 3)."""

    def assign(self, variable, value):
        variable.assign(value)

    def assign_sub(self, variable, value):
        variable.assign_sub(value)

    def _get_variable_index(self, variable):
        return self._index_dict[self._var_key(variable)]


_UPDATES = (_Keras2Updates,) if LEGACY else ()


def make_optimizer(task: TaskSpec, steps_per_epoch: int, epochs: int) -> keras.optimizers.Optimizer:
    """SGD with momentum, Adam or AdamW on the task's schedule, updating as torch's do: SGD's momentum
    buffer holds gradients, not rate-scaled steps (Keras' own folds the rate in, which differs once the rate
    changes); weight decay is an L2 term added to the (all-reduced, unscaled) gradient for SGD and Adam,
    decoupled for AdamW (Keras' AdamW: the same update as torch's); Adam's epsilon is torch's 1e-8."""
    rate, decay = learning_rate(task, steps_per_epoch, epochs), float(task.recipe.weight_decay)
    if task.recipe.optimizer == "adam":
        return TorchAdam(learning_rate=rate, epsilon=1e-8, l2=decay)
    if task.recipe.optimizer == "adamw":
        return keras.optimizers.AdamW(learning_rate=rate, weight_decay=decay, epsilon=1e-8)
    return TorchSGD(learning_rate=rate, momentum=float(task.recipe.momentum), l2=decay)


class TorchSGD(*_UPDATES, keras.optimizers.SGD):
    """torch.optim.SGD's update: b = momentum x b + (g + l2 x w); w -= lr x b."""

    def __init__(self, *, l2: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.l2 = l2

    def update_step(self, gradient, variable, learning_rate=None):
        if learning_rate is None:  # Keras 2: this step's rate (its schedule read at `iterations`)
            learning_rate = self.learning_rate
        rate = ops.cast(learning_rate, variable.dtype)
        step = ops.cast(gradient, variable.dtype)
        if self.l2:
            step = ops.add(step, ops.multiply(variable, ops.cast(self.l2, variable.dtype)))
        if self.momentum:
            buffer = self.momentums[self._get_variable_index(variable)]
            self.assign(buffer, ops.add(ops.multiply(buffer, ops.cast(self.momentum, variable.dtype)), step))
            step = buffer
        self.assign_sub(variable, ops.multiply(step, rate))


class TorchAdam(keras.optimizers.Adam):
    """Keras' Adam with torch's weight_decay: an L2 term in the gradient (Keras' own decay is decoupled)."""

    def __init__(self, *, l2: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.l2 = l2

    def update_step(self, gradient, variable, *learning_rate):  # Keras 2 passes no rate
        if self.l2:
            gradient = ops.add(ops.cast(gradient, variable.dtype), ops.multiply(variable, ops.cast(self.l2, variable.dtype)))
        super().update_step(gradient, variable, *learning_rate)


def learning_rate(task: TaskSpec, steps_per_epoch: int, epochs: int):
    """The rate at each step, as a Keras schedule (a float when it never changes)."""
    peak, total = task.peak_lr, epochs * steps_per_epoch
    warmup = task.lr_warmup_steps(steps_per_epoch)
    start = peak * task.warmup_start_factor
    if task.recipe.schedule == "cosine":
        return keras.optimizers.schedules.CosineDecay(
            initial_learning_rate=start if warmup else peak, decay_steps=max(1, total - warmup), alpha=0.0,
            warmup_target=peak if warmup else None, warmup_steps=warmup)
    if task.recipe.schedule == "step":
        decay = keras.optimizers.schedules.ExponentialDecay(
            peak, decay_steps=task.recipe.lr_step_epochs * steps_per_epoch, decay_rate=task.recipe.lr_gamma,
            staircase=True)
    else:
        if not warmup:
            return peak
        decay = Constant(peak)
    return LinearWarmup(start, warmup, decay) if warmup else decay


class Constant(keras.optimizers.schedules.LearningRateSchedule):
    def __init__(self, rate: float):
        self.rate = rate

    def __call__(self, step):
        return tf.constant(self.rate, tf.float32)

    def get_config(self) -> dict:
        return {"rate": self.rate}


class LinearWarmup(keras.optimizers.schedules.LearningRateSchedule):
    """`start` rising linearly to the peak over `steps` steps, then `after` counted from the warm-up's end
    (torch's SequentialLR: the decay starts where the warm-up ends)."""

    def __init__(self, start: float, steps: int, after: keras.optimizers.schedules.LearningRateSchedule):
        self.start, self.steps, self.after = start, steps, after

    def __call__(self, step):
        step = tf.cast(step, tf.float32)
        peak = tf.cast(self.after(0), tf.float32)
        warming = self.start + (peak - self.start) * step / self.steps
        return tf.where(step < self.steps, warming, tf.cast(self.after(step - self.steps), tf.float32))

    def get_config(self) -> dict:
        return {"start": self.start, "steps": self.steps, "after": keras.saving.serialize_keras_object(self.after)}
