"""Image-folder datasets, in torchvision's `ImageFolder` layout: one folder per class, its name the label.

    DIR/train/<class>/*  and  DIR/test/<class>/*  (or DIR/val/<class>/*)
    DIR/<class>/*        with --val-split F: a seeded fraction F of each class is the test set

`describe` reads a folder's classes, image size and channels into the task (before any run starts, so a
bad folder is one line and exit 2); `read` decodes it into the arrays the cache holds; `export` writes a
task's dataset as such a folder (`bench data export-images`), so every pipeline can read the same images.
"""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from bench.spec.task import SpecError, TaskSpec

READER = "name-order bilinear"  # how `read` decodes and orders: part of the cache key
EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}


def splits(task: TaskSpec) -> dict[str, Path]:
    """{"train": folder, "test": folder}, or {"all": folder} to be split by --val-split; else one line naming the fix."""
    root = Path(task.data_dir)
    if not root.is_dir():
        raise SpecError(f"--data-dir {root} is not a directory: point it at an image folder (DIR/train/<class>/*)")
    test = next((root / d for d in ("test", "val") if (root / d).is_dir()), None)
    if (root / "train").is_dir():
        if test is None and task.val_split is None:
            raise SpecError(f"image folder {root} has train/ but no test/ or val/: add one, or pass --val-split 0.2")
        return {"train": root / "train", "test": test} if test is not None and task.val_split is None else \
            {"all": root / "train"}
    if task.val_split is None:
        raise SpecError(f"image folder {root} has no train/ and test/ (or val/) subfolders: add them, or pass "
                        "--val-split 0.2 to split its class folders")
    return {"all": root}


def classes(folder: Path) -> list[str]:
    names = sorted(p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not names:
        raise SpecError(f"image folder {folder} has no class subfolders: put each class's images in "
                        f"{folder}/<class>/")
    return names


def images_of(folder: Path, cls: str) -> list[Path]:
    files = sorted(f for f in (folder / cls).iterdir() if f.suffix.lower() in EXTENSIONS)
    if not files:
        raise SpecError(f"class folder {folder / cls} holds no images ({', '.join(sorted(EXTENSIONS))}): "
                        "add some or remove it")
    return files


def describe(task: TaskSpec, image_size: int | None = None) -> TaskSpec:
    """The task with the folder's classes, channels and image size (`image_size`, else the first image's)."""
    from PIL import Image, UnidentifiedImageError

    folders = splits(task)
    names = classes(next(iter(folders.values())))
    for split, folder in folders.items():
        if classes(folder) != names:
            raise SpecError(f"image folder {folder} has classes {classes(folder)}, the others {names}: "
                            "give every split the same class folders")
    first = images_of(next(iter(folders.values())), names[0])[0]
    try:
        with Image.open(first) as img:
            width, height, bands = img.width, img.height, len(img.getbands())
    except (UnidentifiedImageError, OSError) as exc:
        raise SpecError(f"corrupt image {first}: {exc}: remove or replace it") from None
    channels = 1 if bands == 1 else 3
    side = image_size or max(width, height)
    if side < 4:
        raise SpecError(f"images of {first.parent} are {width}x{height}: pass --image-size 8 or more")
    return task.replace(image_size=side, channels=channels, classes=len(names))


def fingerprint(task: TaskSpec) -> str:
    """What the cached copy depends on: every file's path, size and mtime, and how it is read."""
    digest = hashlib.sha256()
    for folder in splits(task).values():
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                stat = file.stat()
                digest.update(f"{file.relative_to(folder)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    digest.update(f"{READER}|{task.image_size}|{task.channels}|{task.val_split}|{task.seed}".encode())
    return digest.hexdigest()[:12]


def read(task: TaskSpec) -> dict[str, np.ndarray]:
    """Decode every image (converted to the task's channels, resized to its side); a corrupt one is named."""
    folders = splits(task)
    names = classes(next(iter(folders.values())))
    decoded = {split: _decode(folder, names, task) for split, folder in folders.items()}
    if "all" not in decoded:
        (train_x, train_y), (test_x, test_y) = decoded["train"], decoded["test"]
    else:
        images, labels = decoded["all"]
        rng = np.random.default_rng(task.seed)
        test = np.zeros(len(labels), dtype=bool)
        for label in range(len(names)):  # the same fraction of every class
            members = np.flatnonzero(labels == label)
            test[rng.permutation(members)[:max(1, round(task.val_split * len(members)))]] = True
        train_x, train_y, test_x, test_y = images[~test], labels[~test], images[test], labels[test]
    return {"train_x": train_x, "train_y": train_y, "test_x": test_x, "test_y": test_y}


def _decode(folder: Path, names: list[str], task: TaskSpec) -> tuple[np.ndarray, np.ndarray]:
    from PIL import Image, UnidentifiedImageError

    mode, side = ("L" if task.channels == 1 else "RGB"), task.image_size
    images, labels = [], []
    # One order across classes, by file name (then class): a folder `export` wrote reads back in the
    # dataset's own order, so it trains exactly as the in-memory dataset does.
    files = sorted(((file, label) for label, cls in enumerate(names) for file in images_of(folder, cls)),
                   key=lambda item: (item[0].name, item[1]))
    for file, label in files:
        try:
            with Image.open(file) as img:
                img = img.convert(mode)
                if img.size != (side, side):
                    img = img.resize((side, side), Image.BILINEAR)
                images.append(np.asarray(img, dtype=np.uint8).reshape(side, side, task.channels))
        except (UnidentifiedImageError, OSError, SyntaxError) as exc:
            raise SpecError(f"corrupt image {file}: {exc}: remove or replace it") from None
        labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.int64)


def export(arrays: dict[str, np.ndarray], directory: Path, image_format: str = "png") -> dict[str, int]:
    """Write a dataset's arrays as DIR/train/<class>/<index>.<ext> and DIR/test/<class>/...; class folders are
    the labels, zero-padded so that sorting them keeps the label order. Returns the images written per split."""
    from PIL import Image

    ext = {"png": "png", "jpeg": "jpg"}[image_format]
    written = {}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_x"], arrays[f"{split}_y"]
        width = len(str(int(labels.max())))
        for index, (image, label) in enumerate(zip(images, labels)):
            folder = directory / split / f"{int(label):0{width}d}"
            folder.mkdir(parents=True, exist_ok=True)
            pixels = image[..., 0] if image.shape[-1] == 1 else image
            Image.fromarray(np.ascontiguousarray(pixels)).save(folder / f"{index:06d}.{ext}",
                                                               **({"quality": 95} if ext == "jpg" else {}))
        written[split] = len(labels)
    return written
