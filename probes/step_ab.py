"""dtbench's PyTorch training step against a plain one, in one process, interleaved: whether a gap between
`bench overhead`'s sides lies in the loop (it shows here) or in what differs between processes (it does not).

Both train the same model (built twice from one seed) on one pinned core: dtbench's `train_step` with its
scheduler step and running loss, as torch_impl/train.py runs it, and the plain loop's three lines. Synthetic input
(the default): both on one batch made once. `--input memory`: each side reads the cached dataset its own way, dtbench
through its loader (DataLoader, DistributedSampler, whole-batch fetches: torch_impl/data.py), the plain loop by
indexing the tensor (probes/plain_loop.py). Rounds alternate their order. Prints one JSON line.

    python -m probes.step_ab --model timm:resnet18 --rounds 8 [--core 1]
    python -m probes.step_ab --task default --input memory --model small-cnn --image-size 28 --channels 1 --batch 128
"""
from __future__ import annotations

import argparse
import functools
import itertools
import json
import os
import statistics
import time


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="quick")
    p.add_argument("--input", choices=("synthetic", "memory"), default="synthetic")
    p.add_argument("--model", default="timm:resnet18")
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--image-size", type=int, default=32)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="steps a side per round")
    p.add_argument("--core", type=int, default=0)
    args = p.parse_args()
    os.sched_setaffinity(0, {args.core})
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    from bench.results.stats import median_interval
    from bench.spec.task import get_task
    from torch_impl import data, own_time
    from torch_impl import train as loop
    from torch_impl.model import build_model
    from torch_impl.recipe import make_optimizer, make_scheduler

    task = get_task(args.task, model=args.model, image_size=args.image_size, channels=args.channels,
                    input=args.input, global_batch=args.batch)
    device = torch.device("cpu")
    ours, plain = loop.place(build_model(task), device), build_model(task)
    optimizer = make_optimizer(ours, task)
    scheduler = make_scheduler(optimizer, task, 1000, 1)
    plain_optimizer = torch.optim.SGD(plain.parameters(), lr=task.recipe.lr, momentum=task.recipe.momentum)
    own_time.keep(device)
    if args.input == "memory":
        from types import SimpleNamespace

        from bench.worker import data as cache
        from probes.plain_loop import from_memory

        path = cache.prepare(task)
        arrays = cache.load(path, mmap=False)
        train = data.InMemoryImages(arrays["train_x"], arrays["train_y"])
        loader = data.train_loader(train, args.batch, 0, 1, task.recipe.seed)
        ours_batches = epochs(data.at_most(loader, task.recipe.steps_per_epoch), loader.sampler.set_epoch)
        plain_batches = from_memory(SimpleNamespace(task=task, data_path=path), device)
    else:
        [(images, labels)] = data.synthetic_batches(task, args.batch, device, 1, 0)
        ours_batches = itertools.repeat((images, labels))
        plain_batches = itertools.repeat((data.to_model_input(images, device).clone(), labels.clone()))
    running = loop.RunningLoss(device)
    step = functools.partial(loop.train_step, ours, optimizer, torch.amp.GradScaler("cpu", enabled=False), None,
                             device=device)

    def dtbench_step():
        running.add(step(*next(ours_batches)))
        scheduler.step()

    def plain_step():
        x, y = next(plain_batches)
        plain_optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(plain(x), y).backward()
        plain_optimizer.step()

    sides = {"dtbench": dtbench_step, "plain": plain_step}

    def rate(side) -> float:
        started = time.perf_counter()
        for _ in range(args.steps):
            side()
        return args.batch * args.steps / (time.perf_counter() - started)

    for side in sides.values():
        rate(side)  # warm-up
    rates = {name: [] for name in sides}
    for round_ in range(args.rounds):
        for name in (list(sides) if round_ % 2 == 0 else list(reversed(sides))):
            rates[name].append(rate(sides[name]))
    ratios = [a / b for a, b in zip(rates["dtbench"], rates["plain"])]
    low, high, coverage = median_interval(ratios)
    print(json.dumps({"model": args.model, "input": args.input, "batch": args.batch, "samples_per_s": rates,
                      "ratio_median": statistics.median(ratios), "interval": [low, high], "coverage": coverage,
                      "ratios": ratios}))


def epochs(loader, set_epoch):
    """dtbench's batches epoch after epoch, each epoch's order set as torch_impl/train.py sets it."""
    for epoch in itertools.count():
        set_epoch(epoch)
        yield from loader


if __name__ == "__main__":
    main()
