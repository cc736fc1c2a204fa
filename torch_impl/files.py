"""Image files as PyTorch users read them: torchvision's `ImageFolder` on a folder, AWS's `s3torchconnector`
on an S3 prefix, each decoded by torchvision transforms in `DataLoader` workers (torch_impl.data).

Both give uint8 HWC tensors and labels in the order `bench.worker.imagefolder.listing` gives every pipeline
(by file name, then class), so a folder `bench data export-images` wrote trains exactly as the in-memory
dataset; normalisation stays on the device, as for the in-memory input (timm's loader does the same).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, Subset
from torchvision import datasets, transforms

from bench.spec.task import TaskSpec
from bench.worker import imagefolder, s3


class HWC:
    """CHW uint8 tensor -> HWC: the layout of the in-memory batches (to_model_input permutes on the device)."""

    def __call__(self, image: torch.Tensor) -> torch.Tensor:
        return image.permute(1, 2, 0)


def image_transform(task: TaskSpec) -> transforms.Compose:
    side = task.model.image_size
    return transforms.Compose([transforms.Resize((side, side), transforms.InterpolationMode.BILINEAR),
                               transforms.PILToTensor(), HWC()])


class ImageOpener:
    """ImageFolder's loader: the file in the task's channels, or one line naming a corrupt file."""

    def __init__(self, channels: int):
        self.mode = "L" if channels == 1 else "RGB"

    def __call__(self, path: str):
        from PIL import Image, UnidentifiedImageError

        try:
            with open(path, "rb") as f:
                return Image.open(f).convert(self.mode)
        except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
            raise imagefolder.CorruptImage(f"corrupt image {path}: {exc}: remove or replace it") from None


class NameOrderedImageFolder(datasets.ImageFolder):
    """torchvision's ImageFolder, finding classes and images by dtbench's rules (`bench.worker.imagefolder`: no
    hidden folders, no subfolders of a class, the same extensions) and ordering its samples across classes
    (file name, then class) instead of class by class: what every pipeline reads, so a sampler's seed draws
    the same batches from memory, files and S3."""

    def find_classes(self, directory):
        names = imagefolder.classes(Path(directory))
        return names, {name: index for index, name in enumerate(names)}

    @staticmethod
    def make_dataset(directory, class_to_idx, extensions=None, is_valid_file=None, allow_empty=False):
        samples = [(str(file), index) for name, index in class_to_idx.items()
                   for file in imagefolder.images_of(Path(directory), name)]
        return sorted(samples, key=lambda sample: (Path(sample[0]).name, sample[1]))


class S3Decode:
    """s3torchconnector's transform: an object reader -> (uint8 HWC image, label), labels by class folder."""

    def __init__(self, task: TaskSpec, classes: list[str]):
        self.channels, self.side = task.model.channels, task.model.image_size
        self.label = {name: index for index, name in enumerate(classes)}

    def __call__(self, reader):
        image = imagefolder.decode(reader.read(), f"s3://{reader.bucket}/{reader.key}", self.channels, self.side)
        return torch.from_numpy(image), self.label[reader.key.rsplit("/", 2)[-2]]


def folder_splits(task: TaskSpec, root: str) -> tuple[Dataset, Dataset]:
    """(train, test) ImageFolders of a folder; without test/ the seeded --val-split of every class."""
    found = imagefolder.splits(task.replace(data_dir=root))
    opener, transform = ImageOpener(task.model.channels), image_transform(task)

    def folder(path: Path) -> NameOrderedImageFolder:
        return NameOrderedImageFolder(str(path), transform=transform, loader=opener)

    if "all" not in found:
        return folder(found["train"]), folder(found["test"])
    whole = folder(found["all"])
    test = imagefolder.holdout(np.asarray(whole.targets), task.data.val_split, task.recipe.seed)
    return Subset(whole, np.flatnonzero(~test).tolist()), Subset(whole, np.flatnonzero(test).tolist())


def s3_splits(task: TaskSpec, url: str) -> tuple[Dataset, Dataset]:
    """(train, test) of an S3 prefix through s3torchconnector: map-style datasets of the listed objects."""
    from s3torchconnector import S3ClientConfig, S3MapDataset

    found = imagefolder.listing(task, url)
    bucket, prefix = s3.split_url(url)
    endpoint = s3.endpoint()
    config = S3ClientConfig(force_path_style=endpoint is not None)

    def split(name: str) -> Dataset:
        return S3MapDataset.from_objects([f"s3://{bucket}/{prefix}{key}" for key in found.files[name]],
                                         region=s3.region(), endpoint=endpoint, transform=S3Decode(task, found.classes),
                                         s3client_config=config)

    return split("train"), split("test")
