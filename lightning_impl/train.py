"""lightning: Lightning Fabric with its DDP strategy, one process per device slot, under `fabric run`.

Read top to bottom, this is what Fabric adds to the PyTorch loop (torch_impl/train.py), as its docs'
"convert to Fabric" steps say: `Fabric()` (under `fabric run` its accelerator, strategy, devices, nodes and
precision come from the launcher, which has started the processes and the process group),
`fabric.setup(model, optimizer)` (the DDP wrapper, autocast for bf16-mixed/16-mixed), `fabric.backward(loss)`,
and `fabric.no_backward_sync(model)` for the input phases' windows trained with the all-reduce skipped.
The data stays the loop's own: the same seeded sampler as every PyTorch variant (fabric.setup_dataloaders would
swap in a DistributedSampler, whose padding repeats test images).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from lightning_fabric import Fabric
from lightning_fabric.strategies import DDPStrategy

from bench.spec import knobs
from bench.worker import Worker
from lightning_impl.knobs import STRATEGY
from torch_impl import data
from torch_impl import train as loop
from torch_impl.model import build_model
from torch_impl.profile import region
from bench.worker.kernels import as_shipped
from torch_impl.fast_path import switch_on
from torch_impl.recipe import make_optimizer
from torch_impl.train import set_threads


def train(spec_path: str) -> dict:
    worker = Worker(spec_path)
    with worker.session():
        set_threads(worker.pin())
        # Everything from `fabric run` (its LT_* environment); with knobs set, the strategy from here (Fabric refuses
        # both). The group exists after this.
        settings = knobs.chosen(STRATEGY, worker.task.options.knobs)
        fabric = Fabric(strategy=DDPStrategy(**settings)) if settings else Fabric()
        rank, world_size, device = loop.join_process_group(worker)
        if device != fabric.device:
            raise RuntimeError(f"Fabric trains on {fabric.device}, the harness placed this rank on {device}")
        model = loop.place(build_model(worker.task), device)
        optimizer = make_optimizer(model, worker.task, fused=switch_on("fused_optimizer", device.type, as_shipped()))
        fabric_model, fabric_optimizer = fabric.setup(model, optimizer)
        return loop.train(worker, FabricRank(fabric, fabric_model, fabric_optimizer, model, device, rank, world_size,
                                             optimizer))


class FabricRank(loop.Distributed):
    has_own_step = True

    def __init__(self, fabric: Fabric, fabric_model, fabric_optimizer, model, device, rank: int, world_size: int,
                 optimizer):
        super().__init__(fabric_model, model, device, rank, world_size, optimizer)
        self.fabric, self.fabric_optimizer = fabric, fabric_optimizer

    def step(self, images: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        with region("input"):
            x, y = data.to_model_input(images, self.device), labels.to(self.device, non_blocking=True)
        with region("optimizer"):
            self.fabric_optimizer.zero_grad(set_to_none=True)
        with self.step_sync():  # DDP reads its sync switch in the forward: the forward goes inside
            with region("forward"):
                loss = F.cross_entropy(self.model(x), y)
            with region("backward"):
                self.fabric.backward(loss)
        with region("optimizer"):
            self.fabric_optimizer.step()
        return loss

    def sync_off(self):
        # Fabric's own switch for DDP's: the input phases' window trained with its all-reduce skipped, then undone.
        return self.fabric.no_backward_sync(self.model)


def main() -> None:
    loop.run_rank(train)


if __name__ == "__main__":  # Fabric's DDP strategy starts this file as a script: the guard is required
    main()
