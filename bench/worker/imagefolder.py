"""Image-folder datasets, in torchvision's `ImageFolder` layout: one folder per class, its name the label.

    DIR/train/<class>/*  and  DIR/test/<class>/*  (or DIR/val/<class>/*)
    DIR/<class>/*        with --val-split F: a seeded fraction F of each class is the test set

`describe` reads a folder's classes, image size and channels into the task (before any run starts, so a
bad folder is one line and exit 2); `read` decodes it into the arrays the cache holds; `export` writes a
task's dataset as such a folder (`bench data export-images`), so every pipeline can read the same images.
"""
from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.spec.task import SpecError, TaskSpec

READER = "name-order bilinear"  # how `read` decodes and orders: part of the cache key
EXTENSIONS = {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm"}


def is_remote(root: str) -> bool:
    return root.startswith("s3://")


def splits(task: TaskSpec) -> dict[str, Path]:
    """{"train": folder, "test": folder}, or {"all": folder} to be split by --val-split; else one line naming the fix."""
    root = Path(task.data.data_dir)
    if not root.is_dir():
        raise SpecError(f"--data-dir {root} is not a directory: point it at an image folder (DIR/train/<class>/*)")
    return _split_names(str(root), {d.name for d in root.iterdir() if d.is_dir()}, task.data.val_split,
                        lambda name: root / name)


def _split_names(root: str, top: set[str], val_split: float | None, join) -> dict:
    """The rule for both a folder and an S3 prefix: train/ with test/ (or val/), or class folders to split."""
    test = next((d for d in ("test", "val") if d in top), None)
    if "train" in top:
        if test is None and val_split is None:
            raise SpecError(f"image folder {root} has train/ but no test/ or val/: add one, or pass --val-split 0.2")
        return {"train": join("train"), "test": join(test)} if test is not None and val_split is None else \
            {"all": join("train")}
    if val_split is None:
        raise SpecError(f"image folder {root} has no train/ and test/ (or val/) subfolders: add them, or pass "
                        "--val-split 0.2 to split its class folders")
    return {"all": join("")}


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


def layout(task: TaskSpec, root: str | None = None) -> dict[str, dict[str, list[str]]]:
    """{split: {class: [image, ...]}} of a folder (paths) or an S3 prefix (keys relative to it), every split
    with the same classes; `root` defaults to --data-dir."""
    root = root or task.data.data_dir
    if is_remote(root):
        tree = _remote_layout(root, task.data.val_split)
    else:
        folders = splits(task.replace(data_dir=root))
        tree = {split: {cls: [str(f) for f in images_of(folder, cls)] for cls in classes(folder)}
                for split, folder in folders.items()}
    names = list(next(iter(tree.values())))
    for split, members in tree.items():
        if list(members) != names:
            raise SpecError(f"image folder {root} has classes {list(members)} in {split}, {names} in the first "
                            "split: give every split the same class folders")
    return tree


def _remote_layout(url: str, val_split: float | None) -> dict[str, dict[str, list[str]]]:
    from bench.worker import s3

    keys = [k for k in s3.list_keys(url) if not k.endswith("/")]
    if not keys:
        raise SpecError(f"{url} holds no objects: upload an image folder there (python -m bench data export-images "
                        f"--task T {url})")
    folders = _split_names(url, {k.split("/", 1)[0] for k in keys if "/" in k}, val_split,
                           lambda name: name + "/" if name else "")
    tree = {}
    for split, prefix in folders.items():
        members: dict[str, list[str]] = {}
        for key in keys:
            parts = key[len(prefix):].split("/") if key.startswith(prefix) else []
            if len(parts) == 2 and Path(parts[1]).suffix.lower() in EXTENSIONS and not parts[0].startswith("."):
                members.setdefault(parts[0], []).append(key)
        if not members:
            raise SpecError(f"{url}/{prefix} has no class folders of images (<class>/<image>.png): upload an "
                            "image folder there (python -m bench data export-images --task T s3://...)")
        tree[split] = {cls: sorted(members[cls]) for cls in sorted(members)}
    return tree


@dataclass(frozen=True)
class Listing:
    """Where every image of a train/test split is, and its label, in the order every pipeline reads them."""
    root: str                          # a folder, or s3://bucket/prefix
    classes: list[str]                 # label i is classes[i]
    files: dict[str, list[str]]        # "train" / "test": paths (a folder) or keys relative to the prefix (S3)
    labels: dict[str, np.ndarray]


def listing(task: TaskSpec, root: str | None = None) -> Listing:
    """The folder's (or S3 prefix's) images in one order across classes, by file name (then class): a folder
    `export` wrote reads in the dataset's own order, so it trains exactly as the in-memory dataset does.
    Without test/ a seeded --val-split fraction of every class is the test set."""
    tree = layout(task, root)
    names = list(next(iter(tree.values())))
    ordered = {split: sorted(((file, label) for label, cls in enumerate(names) for file in members[cls]),
                             key=lambda item: (item[0].rsplit("/", 1)[-1], item[1]))
               for split, members in tree.items()}
    columns = {split: ([f for f, _ in items], np.asarray([y for _, y in items], dtype=np.int64))
               for split, items in ordered.items()}
    if "all" in columns:
        files, labels = columns.pop("all")
        test = holdout(labels, task.data.val_split, task.recipe.seed)
        columns = {"train": ([f for f, t in zip(files, test) if not t], labels[~test]),
                   "test": ([f for f, t in zip(files, test) if t], labels[test])}
    return Listing(root or task.data.data_dir, names, {s: c[0] for s, c in columns.items()},
                   {s: c[1] for s, c in columns.items()})


def holdout(labels: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """The test set of a --val-split: a seeded `fraction` of every class (at least one), as a mask."""
    rng = np.random.default_rng(seed)
    test = np.zeros(len(labels), dtype=bool)
    for label in np.unique(labels):
        members = np.flatnonzero(labels == label)
        test[rng.permutation(members)[:max(1, round(fraction * len(members)))]] = True
    return test


def open_bytes(root: str, file: str) -> bytes:
    """One image's encoded bytes from a folder or an S3 prefix."""
    if is_remote(root):
        from bench.worker import s3

        return s3.read_object(root, file)
    return Path(file).read_bytes()


def decode(raw: bytes, name: str, channels: int, side: int) -> np.ndarray:
    """Encoded image -> uint8 HWC in the task's channels and size (bilinear), or one line naming the file."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(raw)) as img:
            img = img.convert("L" if channels == 1 else "RGB")
            if img.size != (side, side):
                img = img.resize((side, side), Image.BILINEAR)
            return np.array(img, dtype=np.uint8).reshape(side, side, channels)  # writable: torch takes it as is
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise CorruptImage(f"corrupt image {name}: {exc}: remove or replace it") from None


class CorruptImage(SpecError):
    """An image that does not decode: named, so the user can remove it."""


def describe(task: TaskSpec, image_size: int | None = None) -> TaskSpec:
    """The task with the folder's classes, channels and image size (`image_size`, else the first image's)."""
    from PIL import Image, UnidentifiedImageError

    root = task.data.data_url if task.data.input == "s3" and task.data.data_url else task.data.data_dir
    tree = layout(task, root)
    first_class = next(iter(tree.values()))
    first = next(iter(first_class.values()))[0]
    try:
        with Image.open(io.BytesIO(open_bytes(root, first))) as img:
            width, height, bands = img.width, img.height, len(img.getbands())
    except (UnidentifiedImageError, OSError) as exc:
        raise SpecError(f"corrupt image {first}: {exc}: remove or replace it") from None
    channels = 1 if bands == 1 else 3
    side = image_size or max(width, height)
    if side < 4:
        raise SpecError(f"images of {root} are {width}x{height}: pass --image-size 8 or more")
    return task.replace(image_size=side, channels=channels, classes=len(first_class))


def fingerprint(task: TaskSpec) -> str:
    """What the cached copy depends on: every file's path, size and mtime, and how it is read."""
    digest = hashlib.sha256()
    for folder in splits(task).values():
        for file in sorted(folder.rglob("*")):
            if file.is_file():
                stat = file.stat()
                digest.update(f"{file.relative_to(folder)}|{stat.st_size}|{stat.st_mtime_ns}\n".encode())
    digest.update(f"{READER}|{task.model.image_size}|{task.model.channels}|{task.data.val_split}|"
                  f"{task.recipe.seed}".encode())
    return digest.hexdigest()[:12]


def read(task: TaskSpec) -> dict[str, np.ndarray]:
    """Decode every image of --data-dir (converted to the task's channels, resized to its side)."""
    found = listing(task)
    arrays = {}
    for split in ("train", "test"):
        arrays[f"{split}_x"] = np.stack([decode(Path(f).read_bytes(), f, task.model.channels, task.model.image_size)
                                         for f in found.files[split]])
        arrays[f"{split}_y"] = found.labels[split]
    return arrays


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
