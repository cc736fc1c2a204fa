"""Input for the PyTorch variants: the shared uint8 cache (batched fetches) or image files (ImageFolder,
S3, torch_impl.files) through DataLoader workers, with the same standard samplers."""
from __future__ import annotations

import itertools
import os
from typing import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler, Sampler

from bench.spec.rank_spec import RankSpec
from bench.spec.task import TaskSpec
from bench.worker import data as cache
from bench.worker.kernels import CHANNELS_LAST_ENV, as_shipped
from torch_impl import loader_workers
from torch_impl.fast_path import CHANNELS_LAST

EVAL_BATCH = cache.EVAL_BATCH


class InMemoryImages(Dataset):
    """uint8 NHWC images + labels, fetched a whole batch at a time (no per-sample collate)."""

    def __init__(self, images: np.ndarray, labels: np.ndarray):
        self.images = torch.from_numpy(np.ascontiguousarray(images))
        self.labels = torch.from_numpy(np.ascontiguousarray(labels))

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int):
        return self.images[index], self.labels[index]

    def __getitems__(self, indices: list[int]):
        index = torch.as_tensor(indices)
        return self.images[index], self.labels[index]


def whole_batch(batch):
    return batch


class ExactShardSampler(Sampler[int]):
    """Rank r gets samples r, r+W, r+2W, ...: every sample exactly once, no padded duplicates.

    DistributedSampler pads the last round with repeated samples, which would
    count some test images twice when the test set does not divide by W.
    """

    def __init__(self, size: int, rank: int, world_size: int):
        self.indices = range(rank, size, world_size)

    def __iter__(self) -> Iterator[int]:
        return iter(self.indices)

    def __len__(self) -> int:
        return len(self.indices)


def load_splits(spec: RankSpec) -> tuple[Dataset, Dataset]:
    """(train, test) of the run's input: the cached arrays, an image folder, or an S3 prefix."""
    task = spec.task
    if task.data.input in ("files", "s3"):
        from torch_impl import files

        return (files.s3_splits if task.data.input == "s3" else files.folder_splits)(task, spec.images)
    arrays = cache.load(spec.data_path, mmap=False)
    return (InMemoryImages(arrays["train_x"], arrays["train_y"]),
            InMemoryImages(arrays["test_x"], arrays["test_y"]))


def loader_options(dataset: Dataset, workers: int, pin_memory: bool) -> dict:
    """In memory: whole batches fetched at once, in the loop. Files: samples decoded by `workers` worker
    processes (0: in the loop), kept alive across epochs, each two batches ahead (PyTorch's default), started
    from a forkserver and ending with the rank (torch_impl.loader_workers)."""
    if isinstance(dataset, InMemoryImages):
        return {"collate_fn": whole_batch, "pin_memory": pin_memory}
    if not workers:
        return {"pin_memory": pin_memory}
    return {"num_workers": workers, "persistent_workers": True, "pin_memory": pin_memory,
            "multiprocessing_context": loader_workers.context(), "worker_init_fn": loader_workers.WorkerStart()}


def train_loader(dataset: Dataset, batch: int, rank: int, world_size: int, seed: int,
                 pin_memory: bool = False, workers: int = 0) -> DataLoader:
    """The same data-order policy for every variant: DistributedSampler(seed), set_epoch per epoch.
    `pin_memory` for a GPU: page-locked batches, so that the copy to the device runs asynchronously."""
    sampler = DistributedSampler(dataset, num_replicas=world_size, rank=rank, shuffle=True,
                                 seed=seed, drop_last=True)
    return DataLoader(dataset, batch_size=batch, sampler=sampler, drop_last=True,
                      **loader_options(dataset, workers, pin_memory))


def eval_loader(dataset: Dataset, rank: int, world_size: int, pin_memory: bool = False,
                workers: int = 0) -> DataLoader:
    return DataLoader(dataset, batch_size=EVAL_BATCH, sampler=ExactShardSampler(len(dataset), rank, world_size),
                      **loader_options(dataset, workers, pin_memory))


class AtMost:
    """The first `steps` batches of each pass over `loader` (the task's steps_per_epoch): its own seeded order,
    cut short."""

    def __init__(self, loader, steps: int):
        self.loader, self.steps = loader, steps

    def __len__(self) -> int:
        return min(len(self.loader), self.steps)

    def __iter__(self):
        return itertools.islice(iter(self.loader), len(self))


def at_most(loader, steps: int | None):
    return AtMost(loader, steps) if steps else loader


def synthetic_batches(task: TaskSpec, batch: int, device: torch.device, steps: int, rank: int):
    """One fixed random batch on the device, reused: throughput without an input pipeline. Its uint8 pixels are
    normalised once here, as a synthetic benchmark's batch is: normalising them again each step cost the small
    CNN about 4 % of its step (probes/step_ab.py)."""
    gen = torch.Generator().manual_seed(task.recipe.seed + rank)
    side, ch = task.model.image_size, task.model.channels
    images = torch.randint(0, 256, (batch, side, side, ch), dtype=torch.uint8, generator=gen)
    labels = torch.randint(0, task.model.classes, (batch,), generator=gen).to(device)
    return [(to_model_input(images, device), labels)] * steps


def channels_last(device: torch.device) -> bool:
    """NHWC where it is the device's fast path, unless the run is --as-shipped (torch's default NCHW) or the
    environment says which (DTBENCH_CHANNELS_LAST=1|0: the fast-path audit, or a user trying it)."""
    chosen = os.environ.get(CHANNELS_LAST_ENV)
    if chosen in ("0", "1"):
        return chosen == "1"
    return CHANNELS_LAST[device.type] and not as_shipped()


def memory_format(device: torch.device) -> torch.memory_format:
    return torch.channels_last if channels_last(device) else torch.contiguous_format


def to_model_input(images: torch.Tensor, device: torch.device) -> torch.Tensor:
    """uint8 NHWC on the host -> normalised float NCHW on the device, in the device's memory format. A float batch
    is one already made so (synthetic_batches): as it is."""
    if images.is_floating_point():
        return images
    x = images.to(device, non_blocking=True).permute(0, 3, 1, 2).float().contiguous(memory_format=memory_format(device))
    return x.div_(255.0).sub_(cache.PIXEL_MEAN).div_(cache.PIXEL_STD)
