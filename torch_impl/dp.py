"""torch-dp: nn.DataParallel, one process driving every visible GPU.

DataParallel scatters each global batch over the GPUs and gathers outputs on
the first. On a machine without CUDA it runs the plain module, so the harness
runs it on one CPU slot only and the row says so.
"""
from __future__ import annotations

import torch
from torch import nn

from bench.worker import Worker, spec_path_from_argv
from torch_impl import memory, train as loop
from torch_impl.model import build_model
from torch_impl.train import device_info, single_process_device


def main() -> None:
    worker = Worker(spec_path_from_argv())
    with worker.session():
        device = single_process_device(worker)
        cuda = device.type == "cuda"
        model = loop.place(build_model(worker.task), device)
        dp_model = nn.DataParallel(model)  # all visible GPUs; the plain module on CPU
        replicas = len(dp_model.device_ids) if cuda else 1
        worker.joined(replicas, backend="dataparallel" if cuda else "none (plain module on CPU)",
                      **device_info(device))

        # One process reads the whole global batch; DataParallel splits it over the GPUs.
        loop.train(worker, DataParallelProcess(dp_model, model, device))


class DataParallelProcess(loop.Approach):
    every_visible_gpu = True

    def sync(self) -> None:
        # DataParallel works on every visible GPU: wait for all of them, not just the current one.
        for index in memory.gpus(self.device, every_visible=True):
            torch.cuda.synchronize(index)


if __name__ == "__main__":
    main()
