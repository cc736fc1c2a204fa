"""torch-ddp-static: DistributedDataParallel with `static_graph=True`, one process per device slot, under torchrun.

Read top to bottom, this is torch-ddp (torch_impl/ddp.py) with one promise made to DDP: every step uses the
same parameters in the same order. DDP then records the gradients' ready order in the first iteration, fixes
its buckets to it and skips the per-step search for unused parameters, which PyTorch's DDP notes name as the
way to overlap more of the all-reduce with the backward pass. Everything else is the PyTorch loop's.
"""
from __future__ import annotations

import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.worker import Worker, exit_now, spec_path_from_argv
from torch_impl import train as loop
from torch_impl.ddp import DDPRank
from torch_impl.model import build_model
from torch_impl.train import set_threads


def train(spec_path: str) -> dict:
    worker = Worker(spec_path)
    with worker.session():
        set_threads(worker.pin())
        rank, world_size, device = loop.join_process_group(worker)
        model = loop.place(build_model(worker.task), device)
        ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                        gradient_as_bucket_view=True, static_graph=True)
        return loop.train(worker, DDPRank(ddp_model, model, device, rank, world_size, independent=False))


def main() -> None:
    train(spec_path_from_argv())
    dist.destroy_process_group()
    exit_now(0)


if __name__ == "__main__":
    main()
