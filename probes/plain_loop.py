"""A plain single-device training loop with no wrapper and no harness: the overhead baseline.

Same model, batch, data, threads and core as a 1-device torch-single run, timed the same way (warm-up, then
windows bounded by a device sync). A synthetic task trains one random batch already normalised on the device, as a
user's synthetic benchmark does. Prints one JSON line.
"""
from __future__ import annotations

import itertools
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from bench.spec.rank_spec import RankSpec
from bench.worker import data as cache
from probes.windows import Windows
from torch_impl.data import memory_format, to_model_input
from torch_impl.model import build_model


def main(spec_path: str) -> None:
    spec = RankSpec.load(spec_path)
    task = spec.task
    cores = spec.node_plans[0].cpu_slots[0]
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(len(cores))
    cuda = spec.device_type == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    model = build_model(task).to(device, memory_format=memory_format(device))
    optimizer = torch.optim.SGD(model.parameters(), lr=task.recipe.lr, momentum=task.recipe.momentum,
                                weight_decay=task.recipe.weight_decay)
    batches = synthetic(task, device) if task.synthetic else from_memory(spec, device)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    windows = Windows(task, sync)
    for _ in range(windows.steps):
        x, y = next(batches)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        windows.step_done()
    windows.report()


def synthetic(task, device: torch.device):
    """Random pixels made into the model's input as a real batch is (to_model_input): the input's layout, not only
    its shape, picks the convolution kernels. One channel permuted from NHWC keeps a channel stride of 1, which
    oneDNN runs as NHWC; a fresh NCHW tensor of the same shape trained the small CNN 1.3x slower on this CPU."""
    gen = torch.Generator().manual_seed(task.recipe.seed)
    side, channels, batch = task.model.image_size, task.model.channels, task.recipe.global_batch
    x = to_model_input(torch.randint(0, 256, (batch, side, side, channels), dtype=torch.uint8, generator=gen), device)
    y = torch.randint(0, task.model.classes, (batch,), generator=gen).to(device)
    while True:
        yield x, y


def from_memory(spec: RankSpec, device: torch.device):
    """The cached training set in one seeded order, a batch at a time, round and round."""
    task = spec.task
    arrays = cache.load(spec.data_path, mmap=False)
    images = torch.from_numpy(np.ascontiguousarray(arrays["train_x"]))
    labels = torch.from_numpy(np.ascontiguousarray(arrays["train_y"]))
    batch = task.recipe.global_batch
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(task.recipe.seed))
    for step in itertools.count():
        first = (step * batch) % (len(order) - batch + 1)
        index = order[first:first + batch]
        yield to_model_input(images[index], device), labels[index].to(device)


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--spec") + 1])
