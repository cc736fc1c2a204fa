import gzip
import json
import struct

import numpy as np
import pytest

from bench.worker import data
from bench.spec.task import PRESETS, SpecError


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DTBENCH_CACHE", str(tmp_path / "cache"))


def idx_bytes(array: np.ndarray) -> bytes:
    return struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(">" + "I" * array.ndim, *array.shape) + array.tobytes()


def test_parse_idx_round_trips():
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    np.testing.assert_array_equal(data.parse_idx(idx_bytes(array)), array)


def test_parse_idx_rejects_truncated_files():
    with pytest.raises(ValueError):
        data.parse_idx(idx_bytes(np.zeros((2, 3), np.uint8))[:-1])


def test_digits_split_is_fixed_and_offline():
    a, b = data.read_digits(seed=0), data.read_digits(seed=0)
    assert a["test_x"].shape == (397, 8, 8, 1) and a["train_x"].shape == (1400, 8, 8, 1)
    assert a["train_x"].dtype == np.uint8 and a["train_x"].max() == 255
    np.testing.assert_array_equal(a["test_y"], b["test_y"])


def test_cache_has_a_manifest_and_catches_corruption(tmp_path):
    folder = data.prepare(PRESETS["quick"])
    manifest = json.loads((folder / "manifest.json").read_text())
    assert set(manifest["files"]) == {"train_x", "train_y", "test_x", "test_y"}
    assert data.prepare(PRESETS["quick"]) == folder  # reused, and verified
    with open(folder / "test_y.npy", "r+b") as f:
        f.seek(-1, 2)
        f.write(b"\x07")
    with pytest.raises(SpecError, match="fails its checksum"):
        data.prepare(PRESETS["quick"])


def test_synthetic_is_never_cached():
    assert data.prepare(PRESETS["resnet50"]) is None


def test_fashion_mnist_from_the_debian_package():
    # `make setup` installs Debian's dataset-fashion-mnist; the default task depends on it.
    folder = data.prepare(PRESETS["default"])
    arrays = data.load(folder)
    assert arrays["train_x"].shape == (60000, 28, 28, 1) and arrays["test_x"].shape == (10000, 28, 28, 1)
    assert sorted(set(arrays["test_y"].tolist())) == list(range(10))


def test_fashion_mnist_with_a_wrong_file_is_refused(tmp_path):
    for stem in data.FASHION_FILES:
        payload = idx_bytes(np.zeros((2, 28, 28) if "images" in stem else (2,), np.uint8))
        (tmp_path / f"{stem}.gz").write_bytes(gzip.compress(payload))
    with pytest.raises(SpecError, match="fails its checksum"):
        data.read_fashion_mnist(str(tmp_path))


def test_a_bundled_dataset_is_cached_in_its_own_shape_whatever_size_the_model_takes(tmp_path, monkeypatch):
    """A fresh cache prepared for `--task quick --image-size 32 --channels 3` (the model resizes on the device):
    refused before, as a shape mismatch, wherever the cache did not hold the dataset yet."""
    from bench.spec.task import get_task
    from bench.worker import data

    monkeypatch.setenv("DTBENCH_CACHE", str(tmp_path))
    folder = data.prepare(get_task("quick", image_size=32, channels=3))
    assert data.load(folder)["train_x"].shape[1:] == (8, 8, 1)
