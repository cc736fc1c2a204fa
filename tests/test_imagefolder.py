"""A user's own image folder: its layout read into the task, a dataset exported and read back identically,
and bad folders refused with one line naming the problem."""
import numpy as np
import pytest

from bench.worker import data, imagefolder
from bench.spec.task import SpecError, get_task
from helpers import CPU, bench, rows


def folder_of(root, splits=("train", "test"), classes=(("cat", 30), ("dog", 220)), count=3, size=(20, 14)):
    from PIL import Image

    for split in splits:
        for cls, shade in classes:
            (root / split / cls).mkdir(parents=True)
            for i in range(count):
                Image.new("RGB", size, (shade, shade, i)).save(root / split / cls / f"{i}.png")
    return root


def task_for(root, **changes):
    return imagefolder.describe(get_task("quick", dataset="imagefolder", data_dir=str(root), **changes),
                                changes.pop("image_size", None))


def test_classes_size_and_channels_come_from_the_folder(tmp_path):
    task = task_for(folder_of(tmp_path))
    assert (task.model.classes, task.model.channels, task.model.image_size) == (2, 3, 20)
    arrays = imagefolder.read(task)
    assert arrays["train_x"].shape == (6, 20, 20, 3)
    assert arrays["test_y"].tolist() == [0, 1, 0, 1, 0, 1]  # by file name, then class


def test_image_size_option_resizes(tmp_path):
    task = imagefolder.describe(get_task("quick", dataset="imagefolder", data_dir=str(folder_of(tmp_path))), 8)
    assert imagefolder.read(task)["train_x"].shape == (6, 8, 8, 3)


def test_a_single_class_tree_is_split_by_a_seeded_fraction_of_every_class(tmp_path):
    root = folder_of(tmp_path, splits=("",), count=10)
    task = task_for(root, val_split=0.2)
    arrays = imagefolder.read(task)
    assert np.bincount(arrays["test_y"]).tolist() == [2, 2] and np.bincount(arrays["train_y"]).tolist() == [8, 8]
    again = imagefolder.read(task)
    assert all(np.array_equal(arrays[k], again[k]) for k in arrays)


def test_an_exported_dataset_reads_back_bit_for_bit_in_its_own_order(tmp_path):
    task = get_task("quick")
    original = data.load(data.prepare(task))
    imagefolder.export(original, tmp_path / "digits")
    back = imagefolder.read(task_for(tmp_path / "digits"))
    for name in ("train_x", "train_y", "test_x", "test_y"):
        assert np.array_equal(back[name], original[name]), name


def no_classes(root):
    (root / "train").mkdir(parents=True)
    (root / "test").mkdir()


def empty_class(root):
    folder_of(root)
    (root / "train" / "empty").mkdir()
    (root / "test" / "empty").mkdir()


def corrupt_image(root):
    folder_of(root)
    (root / "train" / "dog" / "9.png").write_bytes(b"not a png")


@pytest.mark.parametrize("make, message", [
    (no_classes, "has no class subfolders"),
    (empty_class, "empty holds no images"),
    (corrupt_image, "corrupt image .*train/dog/9.png"),
    (lambda root: folder_of(root, splits=("train",)), "no test/ or val/"),
])
def test_bad_folders_are_one_line_naming_the_problem(tmp_path, make, message):
    root = tmp_path / "images"
    make(root)
    with pytest.raises(SpecError, match=message):
        task = task_for(root)
        imagefolder.read(task)


@pytest.mark.parametrize("problem", ["no classes", "empty class", "corrupt"])
def test_bad_folders_exit_2_from_the_cli(tmp_path, problem):
    root = tmp_path / "images"
    if problem == "no classes":
        (root / "train").mkdir(parents=True)
        (root / "test").mkdir()
    else:
        folder_of(root)
        if problem == "empty class":
            (root / "train" / "bird").mkdir()
            (root / "test" / "bird").mkdir()
        else:
            (root / "test" / "cat" / "7.png").write_bytes(b"\x89PNG broken")
    # A corrupt image is found where the run reads its data, inside execute: a process of its own.
    result = bench("run", "--variant", "torch-single", "--task", "quick", "--dataset", "imagefolder",
                   "--data-dir", str(root), "--out", str(tmp_path / "out"), env=CPU)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert {"no classes": "no class subfolders", "empty class": "bird holds no images",
            "corrupt": "corrupt image"}[problem] in line
    if problem == "corrupt":
        assert "test/cat/7.png" in line


@pytest.mark.slow
def test_an_exported_folder_trains_to_the_same_accuracy_as_memory(tmp_path):
    out = tmp_path / "out"
    assert bench("data", "export-images", "--task", "quick", str(tmp_path / "digits")).returncode == 0
    for extra in ([], ["--dataset", "imagefolder", "--data-dir", str(tmp_path / "digits")]):
        result = bench("run", "--variant", "torch-single", "--task", "quick", "--out", str(out), *extra, env=CPU)
        assert result.returncode == 0, result.stderr
    memory, files = rows(out)
    assert files["task"]["dataset"] == "imagefolder" and memory["task"]["dataset"] == "digits"
    assert abs(files["test_accuracy"] - memory["test_accuracy"]) <= 0.005
