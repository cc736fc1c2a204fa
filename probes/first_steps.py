"""How many steps a model takes to settle: each of the first STEPS training steps of tf-single's loop, timed one
by one (a device sync after each), on one pinned core with one thread a pool. What a task's warm-up must cover
(bench.studies.overhead.MIN_TIMING). Prints one JSON line.

    python -m probes.first_steps --model efficientnet_b0 --steps 40 [--core 1]
"""
from __future__ import annotations

import argparse
import json
import os
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="efficientnet_b0", help="a model both frameworks build, keras:NAME or built-in")
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--core", type=int, default=0)
    args = p.parse_args()
    os.sched_setaffinity(0, {args.core})
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from bench.spec.task import get_task
    from tf_impl import train as loop

    task = get_task("quick", model=args.model, image_size=args.image_size, channels=3, input="synthetic",
                    global_batch=args.batch)
    strategy = tf.distribute.get_strategy()
    *_, train_step_on = loop.build_training(task, strategy, args.steps, 1)
    batch = loop.synthetic_batch(strategy, task)
    step_ms = []
    for _ in range(args.steps):
        started = time.perf_counter()
        train_step_on(*batch).numpy()
        step_ms.append(round(1000 * (time.perf_counter() - started), 1))
    print(json.dumps({"model": args.model, "batch": args.batch, "image_size": args.image_size, "step_ms": step_ms}))


if __name__ == "__main__":
    main()
