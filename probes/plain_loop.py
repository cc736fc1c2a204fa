"""A plain single-device training loop with no wrapper and no harness: the overhead baseline.

Same model, batch, data, threads and core as a 1-device torch-ddp run, timed the
same way (warm-up, then windows bounded by a device sync). Prints one JSON line.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from bench.spec.rank_spec import RankSpec
from bench.worker import data as cache
from probes.windows import Windows
from torch_impl.data import to_model_input
from torch_impl.model import build_model


def main(spec_path: str) -> None:
    spec = RankSpec.load(spec_path)
    task = spec.task
    cores = spec.node_plans[0].cpu_slots[0]
    os.sched_setaffinity(0, cores)
    torch.set_num_threads(len(cores))
    cuda = spec.device_type == "cuda"
    device = torch.device("cuda", 0) if cuda else torch.device("cpu")
    arrays = cache.load(spec.data_path, mmap=False)
    images = torch.from_numpy(np.ascontiguousarray(arrays["train_x"]))
    labels = torch.from_numpy(np.ascontiguousarray(arrays["train_y"]))
    model = build_model(task).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=task.recipe.lr, momentum=task.recipe.momentum,
                                weight_decay=task.recipe.weight_decay)
    batch = task.recipe.global_batch

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(task.recipe.seed))
    windows = Windows(task, sync)
    for step in range(windows.steps):
        first = (step * batch) % (len(order) - batch + 1)
        index = order[first:first + batch]
        x, y = to_model_input(images[index], device), labels[index].to(device)
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        windows.step_done()
    windows.report()


if __name__ == "__main__":
    main(sys.argv[sys.argv.index("--spec") + 1])
