"""A plain single-device JAX loop with no mesh and no harness: the overhead baseline of jax-single.

The loop a JAX user writes from optax's quick start: the same model, batch, data and core as a 1-device jax-single
run, a `jax.jit` step (value_and_grad, optax.sgd, the parameters' and optimizer state's buffers donated), timed the
same way (warm-up, then windows bounded by waiting for the last loss). A synthetic task trains one random batch
already normalised on the device; otherwise shuffled batches gathered from the arrays in memory and normalised in
the step. Prints one JSON line.
"""
from __future__ import annotations

import os
import sys

from bench.spec.rank_spec import RankSpec


def main(spec_path: str) -> None:
    spec = RankSpec.load(spec_path)
    task = spec.task
    os.sched_setaffinity(0, spec.node_plans[0].cpu_slots[0])
    import jax
    import jax.numpy as jnp
    import numpy as np
    import optax

    from bench.worker import data as cache
    from jax_impl.model import build_model
    from probes.windows import Windows

    params, apply = build_model(task)
    optimizer = optax.sgd(task.recipe.lr, momentum=task.recipe.momentum)
    opt_state = optimizer.init(params)

    def loss_of(params, x, y):
        if x.dtype == jnp.uint8:
            x = (x.astype(jnp.float32) / 255.0 - cache.PIXEL_MEAN) / cache.PIXEL_STD
        return optax.softmax_cross_entropy_with_integer_labels(apply(params, x), y).mean()

    def step(params, opt_state, x, y):
        loss, grads = jax.value_and_grad(loss_of)(params, x, y)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(step, donate_argnums=(0, 1))
    batch = task.recipe.global_batch
    if task.synthetic:
        side, channels = task.model.image_size, task.model.channels
        key = jax.random.key(task.recipe.seed)
        fixed = (jax.random.normal(key, (batch, side, side, channels)),
                 jax.random.randint(key, (batch,), 0, task.model.classes))
        batches = iter(lambda: fixed, None)
    else:
        arrays = cache.load(spec.data_path, mmap=False)
        train_x, train_y = arrays["train_x"], arrays["train_y"].astype(np.int32)
        rng = np.random.default_rng(task.recipe.seed)

        def shuffled():
            while True:
                order = rng.permutation(len(train_y))
                for i in range(len(order) // batch):
                    at = order[i * batch:(i + 1) * batch]
                    yield train_x[at], train_y[at]

        batches = shuffled()

    losses = []
    windows = Windows(task, sync=lambda: losses[-1].block_until_ready())  # the last step has run once its loss exists
    for _ in range(windows.steps):
        params, opt_state, loss = step(params, opt_state, *next(batches))
        losses = [loss]
        windows.step_done()
    windows.report()


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--spec") + 1])
