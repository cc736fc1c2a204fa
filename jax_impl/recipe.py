"""The training recipe through optax: torch's SGD (momentum buffer of gradients, L2 weight decay added to the
gradient), Adam (L2 in the gradient) and AdamW (decoupled), on the task's schedule (bench.spec.task): a linear
warm-up from `warmup_start_factor x peak` to the peak, then constant, step (x lr_gamma every lr_step_epochs) or
cosine (to 0 at the last step), as torch_impl/recipe.py builds it."""
from __future__ import annotations

import optax

from bench.spec.task import TaskSpec


def make_optimizer(task: TaskSpec, steps_per_epoch: int, epochs: int) -> optax.GradientTransformation:
    rate, decay = learning_rate(task, steps_per_epoch, epochs), float(task.recipe.weight_decay)
    if task.recipe.optimizer == "adamw":
        return optax.adamw(rate, eps=1e-8, weight_decay=decay)
    # optax.trace is torch's buffer: b = momentum x b + g; the rate scales it afterwards.
    update = optax.adam(rate, eps=1e-8) if task.recipe.optimizer == "adam" else \
        optax.sgd(rate, momentum=float(task.recipe.momentum) or None)
    return optax.chain(optax.add_decayed_weights(decay), update) if decay else update


def learning_rate(task: TaskSpec, steps_per_epoch: int, epochs: int) -> optax.Schedule:
    peak, total = task.peak_lr, epochs * steps_per_epoch
    warmup = task.lr_warmup_steps(steps_per_epoch)
    if task.recipe.schedule == "cosine":
        after = optax.cosine_decay_schedule(peak, max(1, total - warmup))
    elif task.recipe.schedule == "step":
        after = optax.exponential_decay(peak, task.recipe.lr_step_epochs * steps_per_epoch, task.recipe.lr_gamma,
                                        staircase=True)
    else:
        after = optax.constant_schedule(peak)
    if not warmup:
        return after
    start = optax.linear_schedule(peak * task.warmup_start_factor, peak, warmup)
    return optax.join_schedules([start, after], [warmup])
