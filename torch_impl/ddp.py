"""torch-ddp: DistributedDataParallel, one process per device slot, started by torchrun.

Read top to bottom, this is what DDP adds to the PyTorch loop (torch_impl/train.py):
the process group from torchrun's environment, one device per local rank, the DDP
wrapper, a barrier at the clock's window boundaries, and each rank's shard of the data.

torch-ddp-static is this module with `static_graph=True`: the promise that every step uses the same parameters
in the same order. DDP then records the gradients' ready order in the first iteration, fixes its buckets to it
and skips the per-step search for unused parameters, which PyTorch's DDP notes name as the way to overlap more
of the all-reduce with the backward pass.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass

from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from bench.spec import knobs
from bench.worker import Worker
from torch_impl import train as loop
from torch_impl.knobs import DDP as KNOBS
from torch_impl.model import build_model
from torch_impl.train import set_threads


# A 1-channel conv's weight gradient has strides that differ from DDP's bucket
# view only along its size-1 dimension: the same memory layout, a spurious warning.
warnings.filterwarnings("ignore", message="Grad strides do not match bucket view strides")


@dataclass(frozen=True)
class DDPSettings:
    """What the variants table may set for this module (Variant.approach)."""
    static_graph: bool = False  # torch-ddp-static


def train(spec_path: str) -> dict:
    """One rank of a run. Under torchrun it makes the process group from torchrun's environment;
    under an engine (`bench.engines.api.run`) the group already exists and is the engine's to close."""
    worker = Worker(spec_path)
    settings = DDPSettings(**worker.approach)  # a setting this module does not take fails here, by name
    with worker.session():
        set_threads(worker.pin())
        rank, world_size, device = loop.join_process_group(worker)
        model = loop.place(build_model(worker.task), device)
        ddp_model = wrap(model, device, knobs.values(KNOBS, worker.task.options.knobs), settings.static_graph)
        return loop.train(worker, DDPRank(ddp_model, model, device, rank, world_size, independent=worker.independent))


# The communication hooks a run may set (torch_impl/knobs.py COMM_HOOK): PyTorch's own.
COMM_HOOKS = {"bf16_compress": default_hooks.bf16_compress_hook, "fp16_compress": default_hooks.fp16_compress_hook}


def wrap(model: nn.Module, device, tuned: dict, static_graph: bool) -> DDP:
    """DDP around `model` with the run's knobs (each at its default unless --set): the bucket size, the gradients
    as views into the buckets (no copy in and out each step), a static graph (torch-ddp-static always), and a
    communication hook."""
    ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                    bucket_cap_mb=tuned["bucket_cap_mb"], gradient_as_bucket_view=tuned["gradient_as_bucket_view"],
                    static_graph=static_graph or tuned["static_graph"])
    if tuned["comm_hook"] != "none":
        ddp_model.register_comm_hook(None, COMM_HOOKS[tuned["comm_hook"]])  # None: the default process group
    return ddp_model


class DDPRank(loop.Distributed):
    def __init__(self, ddp_model: DDP, model, device, rank: int, world_size: int, independent: bool):
        super().__init__(ddp_model, model, device, rank, world_size)
        self.independent = independent

    def no_sync(self):
        # Independent runs are the no-communication bound: DDP skips its all-reduce.
        return self.model.no_sync() if self.independent else super().no_sync()

    def sync_off(self):
        # A static graph's buckets are fixed to the synchronised steps' order: no window without them.
        return None if self.model.static_graph else self.model.no_sync()


def main() -> None:
    loop.run_rank(train)


if __name__ == "__main__":
    main()
