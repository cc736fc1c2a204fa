"""Dataset preparation into a framework-neutral cache.

Every dataset is read once into uint8 NHWC images + int64 labels saved as .npy
with a manifest holding shapes and SHA-256 checksums. Both frameworks read the
same files and normalise on the device, so no framework-specific preprocessing
ever reaches the disk. Synthetic data is never cached: workers make it on the
device, as tf_cnn_benchmarks and Horovod's benchmarks do.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
import shutil
import struct
import subprocess
import urllib.request
from pathlib import Path

import numpy as np

from bench import REPO_ROOT
from bench.worker import imagefolder
from bench.spec.task import DATASET_SHAPES, SpecError, TaskSpec

log = logging.getLogger(__name__)

# What every framework does with the cached uint8 images, so that all variants see the same input
# and count the same test set: x/255 -> [-1, 1] on the device, evaluation in batches of 512.
PIXEL_MEAN, PIXEL_STD = 0.5, 0.5
EVAL_BATCH = 512

# Debian's package `dataset-fashion-mnist` installs the idx files here.
FASHION_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
# SHA-256 of the *decompressed* idx files: gzip repacking (Debian's) keeps these stable.
FASHION_FILES = {
    "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
    "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
    "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
    "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
}
DIGITS_TEST_SIZE = 397  # a prime, so no world size > 1 divides the test set evenly


def cache_root() -> Path:
    """DTBENCH_CACHE; else a checkout's own .cache/dtbench; else (an installed dtbench) the user's cache directory,
    XDG's ($XDG_CACHE_HOME, ~/.cache), never site-packages."""
    if os.environ.get("DTBENCH_CACHE"):
        return Path(os.environ["DTBENCH_CACHE"])
    if (REPO_ROOT / "pyproject.toml").is_file():
        return REPO_ROOT / ".cache" / "dtbench"
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "dtbench"


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# ---------------------------------------------------------------- readers

def parse_idx(raw: bytes) -> np.ndarray:
    """Parse the IDX format of (Fashion-)MNIST: magic, dims, then unsigned bytes."""
    zero, dtype_code, ndim = struct.unpack(">HBB", raw[:4])
    if zero != 0 or dtype_code != 0x08:
        raise ValueError("not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, raw[4:4 + 4 * ndim])
    body = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if body.size != int(np.prod(dims)):
        raise ValueError(f"IDX body has {body.size} bytes, header says {dims}")
    return body.reshape(dims)


def _read_maybe_gzip(directory: Path, stem: str) -> bytes | None:
    for name, opener in ((stem + ".gz", gzip.open), (stem, open)):
        if (directory / name).exists():
            with opener(directory / name, "rb") as f:
                return f.read()
    return None


def fashion_source_dirs(data_dir: str | None) -> list[Path]:
    dirs = [Path(data_dir)] if data_dir else []
    if os.environ.get("DTBENCH_FASHION_MNIST_DIR"):
        dirs.append(Path(os.environ["DTBENCH_FASHION_MNIST_DIR"]))
    return dirs + [FASHION_SYSTEM_DIR, cache_root() / "downloads" / "fashion-mnist"]


def read_fashion_mnist(data_dir: str | None = None) -> dict[str, np.ndarray]:
    for directory in fashion_source_dirs(data_dir):
        raws = {stem: _read_maybe_gzip(directory, stem) for stem in FASHION_FILES}
        if all(raw is not None for raw in raws.values()):
            break
    else:
        raise SpecError(
            "Fashion-MNIST not found: run `make setup` (installs Debian's dataset-fashion-mnist), "
            "or `python -m bench data --download`, or pass --data-dir DIR")
    for stem, raw in raws.items():
        if sha256_bytes(raw) != FASHION_FILES[stem]:
            raise SpecError(f"Fashion-MNIST file {directory / stem} fails its checksum: delete it and fetch it again")
    arrays = {stem: parse_idx(raw) for stem, raw in raws.items()}
    return {
        "train_x": arrays["train-images-idx3-ubyte"][..., None],
        "train_y": arrays["train-labels-idx1-ubyte"].astype(np.int64),
        "test_x": arrays["t10k-images-idx3-ubyte"][..., None],
        "test_y": arrays["t10k-labels-idx1-ubyte"].astype(np.int64),
    }


def read_digits(seed: int = 0) -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits  # shipped with scikit-learn: offline

    digits = load_digits()
    images = np.round(digits.images * (255.0 / 16.0)).astype(np.uint8)[..., None]
    labels = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(labels))
    test, train = order[:DIGITS_TEST_SIZE], order[DIGITS_TEST_SIZE:]
    return {"train_x": images[train], "train_y": labels[train],
            "test_x": images[test], "test_y": labels[test]}


# ---------------------------------------------------------------- cache

def cache_key(task: TaskSpec) -> str:
    if task.data.dataset == "imagefolder":
        return f"imagefolder-{imagefolder.fingerprint(task)}-{task.model.image_size}px-{task.model.channels}ch"
    if task.data.dataset == "digits":
        return f"digits-seed{task.recipe.seed}"
    return task.data.dataset


def _read_source(task: TaskSpec) -> dict[str, np.ndarray]:
    if task.data.dataset == "fashion-mnist":
        return read_fashion_mnist(task.data.data_dir)
    if task.data.dataset == "digits":
        return read_digits(task.recipe.seed)
    return imagefolder.read(task)


def prepare(task: TaskSpec) -> Path | None:
    """Make sure the task's dataset is in the cache, and for --input files its image folder; return the
    cache's folder (None for synthetic data and for an image folder read as files)."""
    if task.synthetic or (task.data.dataset == "imagefolder" and task.reads_files):
        return None
    folder = _prepare_arrays(task)
    if task.data.input == "files":
        export_images(task, folder)
    return folder


def images_root(task: TaskSpec) -> str | None:
    """Where a run with --input files or s3 reads its images: the user's image folder, the task's dataset
    exported into the cache (`prepare`), or the S3 URL."""
    if task.data.input == "s3":
        return task.data.data_url
    if task.data.input != "files":
        return None
    return task.data.data_dir if task.data.dataset == "imagefolder" else str(exported_images_dir(task))


def check_remote(task: TaskSpec) -> None:
    """Before a run with --input s3 starts: the endpoint answers, the credentials and bucket are good, the
    prefix holds an image folder, and its images are the task's (classes, channels, size); else one line."""
    theirs, mine = imagefolder.describe(task).model, task.model
    # An image folder's task may resize (--image-size); a bundled dataset's images must be its own size.
    same_size = task.data.dataset == "imagefolder" or theirs.image_size == mine.image_size
    if not same_size or (theirs.classes, theirs.channels) != (mine.classes, mine.channels):
        raise SpecError(f"{task.data.data_url} holds {theirs.classes} classes of {theirs.image_size}px "
                        f"{theirs.channels}-channel images, task {task.name} trains {mine.classes} classes of "
                        f"{mine.image_size}px {mine.channels}-channel ones: upload the task's own (python -m bench "
                        f"data export-images --task {task.name} {task.data.data_url})")


def exported_images_dir(task: TaskSpec) -> Path:
    return cache_root() / "images" / f"{cache_key(task)}-png"


def export_images(task: TaskSpec, folder: Path) -> Path:
    """The cached dataset as a PNG image folder beside it, written once (lossless: it decodes to the same
    pixels, so files and memory train on identical images)."""
    target = exported_images_dir(task)
    if (target / "written.json").exists():
        return target
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    written = imagefolder.export(load(folder), tmp, "png")
    (tmp / "written.json").write_text(json.dumps(written))
    _publish(tmp, target)
    log.info("exported %s as an image folder in %s", task.data.dataset, target)
    return target


def _publish(tmp: Path, target: Path) -> None:
    """A folder written in full under a temporary name becomes `target` in one rename; when another process
    won the race, its copy stays and this one goes."""
    if target.exists():
        shutil.rmtree(tmp)
    else:
        tmp.rename(target)


def _prepare_arrays(task: TaskSpec) -> Path:
    folder = cache_root() / cache_key(task)
    if (folder / "manifest.json").exists():
        verify(folder)
        return folder
    arrays = _read_source(task)
    x_shape = arrays["train_x"].shape[1:]
    # A bundled dataset is cached in its own shape whatever size the model takes (it resizes on the device).
    side, channels, _ = DATASET_SHAPES.get(task.data.dataset, (task.model.image_size, task.model.channels, None))
    if x_shape != (side, side, channels):
        raise SpecError(f"dataset {task.data.dataset} has images of shape {x_shape}, task {task.name} expects "
                        f"{(side, side, channels)}: fix image_size/channels")
    tmp = folder.with_name(folder.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, array in arrays.items():
        np.save(tmp / f"{name}.npy", np.ascontiguousarray(array))
        files[name] = {"shape": list(array.shape), "dtype": str(array.dtype),
                       "sha256": sha256_file(tmp / f"{name}.npy")}
    manifest = {"dataset": task.data.dataset, "key": cache_key(task), "files": files,
                "classes": int(arrays["train_y"].max()) + 1}
    (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1))
    _publish(tmp, folder)
    log.info("prepared %s in %s", task.data.dataset, folder)
    return folder


def verify(folder: Path) -> dict:
    manifest = json.loads((folder / "manifest.json").read_text())
    for name, meta in manifest["files"].items():
        if sha256_file(folder / f"{name}.npy") != meta["sha256"]:
            raise SpecError(f"cached {folder / name}.npy fails its checksum: delete {folder} and run again")
    return manifest


def load(folder: str | Path, mmap: bool = True) -> dict[str, np.ndarray]:
    """Read a prepared dataset (used inside the workers of every framework)."""
    folder = Path(folder)
    mode = "r" if mmap else None
    return {name: np.load(folder / f"{name}.npy", mmap_mode=mode)
            for name in ("train_x", "train_y", "test_x", "test_y")}


# ---------------------------------------------------------------- getting the raw files

def install_fashion_mnist() -> bool:
    """Install Debian's dataset-fashion-mnist (needs root or passwordless sudo)."""
    if all((FASHION_SYSTEM_DIR / f"{stem}.gz").exists() for stem in FASHION_FILES):
        return True
    # A cache carried to a box without a registry (a GPU machine, SETUP=none) needs no package:
    # apt-get there would fail or hang on a network it cannot reach.
    if (cache_root() / "fashion-mnist" / "manifest.json").exists():
        return True
    if shutil.which("apt-get") is None:
        return False
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for cmd in (["apt-get", "install", "-y", "-q", "dataset-fashion-mnist"],
                ["apt-get", "update", "-q"],
                ["apt-get", "install", "-y", "-q", "dataset-fashion-mnist"]):
        result = subprocess.run(prefix + cmd, env=env, capture_output=True, text=True)
        if result.returncode == 0 and cmd[1] == "install":
            return True
    return (FASHION_SYSTEM_DIR / "train-images-idx3-ubyte.gz").exists()


def download_fashion_mnist() -> Path:
    """Opt-in download for machines with internet; every file is checksum-verified."""
    target = cache_root() / "downloads" / "fashion-mnist"
    target.mkdir(parents=True, exist_ok=True)
    for stem, expected in FASHION_FILES.items():
        dest = target / f"{stem}.gz"
        if not dest.exists():
            with urllib.request.urlopen(FASHION_URL + dest.name, timeout=60) as response:
                payload = response.read()
            if sha256_bytes(gzip.decompress(payload)) != expected:
                raise SpecError(f"downloaded {dest.name} fails its checksum: try again later")
            dest.write_bytes(payload)
    return target
