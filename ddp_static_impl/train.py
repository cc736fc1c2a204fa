"""torch-ddp-static: DistributedDataParallel with `static_graph=True`, one process per device slot, under torchrun.

This is torch-ddp (torch_impl/ddp.py) with one promise made to DDP: every step uses the same parameters in the
same order. DDP then records the gradients' ready order in the first iteration, fixes its buckets to it and
skips the per-step search for unused parameters, which PyTorch's DDP notes name as the way to overlap more of
the all-reduce with the backward pass. Everything else is the PyTorch loop's.
"""
from __future__ import annotations

from torch_impl import ddp
from torch_impl import train as loop


def train(spec_path: str) -> dict:
    return ddp.train(spec_path, static_graph=True)


if __name__ == "__main__":
    loop.run_rank(train)
