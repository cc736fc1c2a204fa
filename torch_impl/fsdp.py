"""torch-fsdp: fully sharded data parallelism (FSDP2, `fully_shard`), one process per device slot, under torchrun.

Read top to bottom, this is what FSDP adds to the PyTorch loop (torch_impl/train.py): each block of the
model and then its root sharded over a one-dimensional device mesh, so that each rank holds 1/N of the
parameters, gradients and optimizer state and all-gathers a block's parameters for its forward and
backward; mixed precision through FSDP's own policy (parameters gathered in bf16/fp16, gradients reduced
in fp32) instead of autocast; evaluation in lockstep, because every forward is a collective.
"""
from __future__ import annotations

import torch
from torch import nn
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

from bench.spec import knobs
from bench.worker import Worker
from torch_impl import train as loop
from torch_impl.knobs import FSDP as KNOBS
from torch_impl.model import Resized, build_model
from torch_impl.train import AMP_DTYPES, set_threads


def shard_units(model: nn.Module) -> list[nn.Module]:
    """The blocks each sharded on their own (all-gathered one at a time): a ResNet's residual blocks, a
    transformer's or an EfficientNet's `blocks`, a ConvNeXt's `stages` (the names timm and torchvision give their
    repeated blocks), else the model's top-level layers that hold parameters."""
    model = model.model if isinstance(model, Resized) else model
    if hasattr(model, "layer1"):
        return [block for name in ("layer1", "layer2", "layer3", "layer4") if hasattr(model, name)
                for block in getattr(model, name)]
    for name in ("blocks", "stages"):
        repeated = getattr(model, name, None)
        if isinstance(repeated, (nn.Sequential, nn.ModuleList)) and len(repeated) > 1:
            return [block for block in repeated if any(p.requires_grad for p in block.parameters())]
    layers = list(model.children())
    if len(layers) == 1:  # one Sequential: its layers
        layers = list(layers[0].children())
    return [layer for layer in layers if any(p.requires_grad for p in layer.parameters())]


def shard(model: nn.Module, device: torch.device, world_size: int, precision: str, settings: dict) -> nn.Module:
    """`settings`: the run's knobs (torch_impl/knobs.py FSDP), each at its default unless --set. The root keeps
    FSDP2's own reshard_after_forward (its parameters are gathered again at once for the backward)."""
    mesh = init_device_mesh(device.type, (world_size,))
    dtype = AMP_DTYPES.get(precision)
    policy = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32 if dtype else None)
    blocks = shard_units(model) if settings["shard_unit"] == "block" else []
    for block in blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=settings["reshard_after_forward"])
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def train(spec_path: str) -> dict:
    worker = Worker(spec_path)
    with worker.session():
        set_threads(worker.pin())
        rank, world_size, device = loop.join_process_group(worker)
        model = shard(build_model(worker.task).to(device), device, world_size, worker.task.recipe.precision,
                      knobs.values(KNOBS, worker.task.options.knobs))
        return loop.train(worker, FSDPRank(model, model, device, rank, world_size))


class FSDPRank(loop.Distributed):
    precision_in_model = True   # its MixedPrecisionPolicy casts
    lockstep_eval = True        # every forward all-gathers the parameters
    channels_last = False       # FSDP2 refuses channels_last parameters (pytorch/pytorch#166291)
    fused_optimizer = False     # DTensor parameters: the fused step is untried with them on a GPU here

    def full_state_dict(self):
        # The shards all-gathered into whole tensors on rank 0's CPU (the other ranks get none).
        state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        return state if self.rank == 0 else None


def main() -> None:
    loop.run_rank(train)


if __name__ == "__main__":
    main()
