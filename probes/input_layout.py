"""Does the input's layout, not only its shape, change a CPU training step? The small CNN's step on one pinned core,
fed the same batch in two strides: as dtbench's input path makes it (uint8 NHWC permuted to NCHW: with one channel
its channel stride is 1) and as a fresh NCHW tensor (channel stride H*W), and random values in each, to tell the
values from the layout. Prints samples/s per feed.

    python -m probes.input_layout [--steps 60]
"""
from __future__ import annotations

import argparse
import os
import time

import torch
import torch.nn.functional as F

from bench.spec.task import get_task
from torch_impl.data import memory_format, to_model_input
from torch_impl.model import build_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    os.sched_setaffinity(0, {0})
    torch.set_num_threads(1)
    task, device = get_task("default"), torch.device("cpu")
    fmt = memory_format(device)
    gen = torch.Generator().manual_seed(0)
    side, batch = task.model.image_size, task.recipe.global_batch
    permuted = to_model_input(torch.randint(0, 256, (batch, side, side, 1), dtype=torch.uint8, generator=gen), device)
    fresh = torch.randn((batch, 1, side, side), generator=gen).contiguous(memory_format=fmt)
    nchw = (side * side, side * side, side, 1)  # one channel
    feeds = {"dtbench's (permuted)": permuted, "fresh NCHW": fresh,
             "dtbench's values, NCHW strides": torch.empty_strided(permuted.shape, nchw).copy_(permuted),
             "fresh values, permuted strides": torch.empty_strided(fresh.shape, permuted.stride()).copy_(fresh)}
    labels = torch.randint(0, task.model.classes, (batch,), generator=gen)
    model = build_model(task).to(device, memory_format=fmt)
    optimizer = torch.optim.SGD(model.parameters(), lr=task.recipe.lr, momentum=task.recipe.momentum)

    def step(x: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), labels).backward()
        optimizer.step()

    print(f"model memory format {fmt}; batch {batch}; one core")
    for _ in range(2):  # twice, interleaved: the second pass is the figure, the first shows the drift
        for name, x in feeds.items():
            for _ in range(10):
                step(x)
            started = time.perf_counter()
            for _ in range(args.steps):
                step(x)
            rate = batch * args.steps / (time.perf_counter() - started)
            print(f"{name:32s} strides {str(x.stride()):20s} {rate:7.0f} samples/s")


if __name__ == "__main__":
    main()
