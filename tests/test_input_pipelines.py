"""Input pipelines as users run them (`--input files|s3`, `--loader-workers`): the same images in the same
order as the in-memory input, from a folder and from a real S3-compatible server on loopback; bad sources
refused in one line, before anything starts, with no secret in the output."""
import dataclasses
import os
import threading

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from bench.results.key import config_key
from bench.worker import data, imagefolder
from bench.sweep import plan
from bench.spec.task import get_task
from bench.spec.variants import get_variant
from bench.analysis.folder import Folder
from helpers import CPU, bench, cli, rows
from tests.listening import is_loopback, listeners_of


def memory_batches(task, workers=0):
    from torch_impl import data as torch_data

    arrays = data.load(data.prepare(task.replace(input="memory", loader_workers=0)), mmap=False)
    return torch_data.train_loader(torch_data.InMemoryImages(arrays["train_x"], arrays["train_y"]), 64, 1, 2, 0)


def test_the_file_pipeline_draws_the_in_memory_batches():
    """ImageFolder + DataLoader workers over the exported PNGs: batch for batch what rank 1 of 2 reads from memory."""
    from torch_impl import data as torch_data
    from torch_impl import files

    task = get_task("quick", input="files", loader_workers=2)
    data.prepare(task)
    train, _ = files.folder_splits(task, data.images_root(task))
    loader = torch_data.train_loader(train, 64, 1, 2, 0, workers=2)
    assert loader.num_workers == 2 and loader.persistent_workers
    pairs = list(zip(loader, memory_batches(task)))
    assert len(pairs) == len(loader) > 5
    for (images, labels), (want_images, want_labels) in pairs:
        assert images.dtype == torch.uint8 and torch.equal(images, want_images) and torch.equal(labels, want_labels)


HELD = threading.Lock()  # held by another thread of the "rank" while its loader starts its worker


class LockedSamples(Dataset):
    """Samples that take HELD: a worker that inherited it held waits forever, as the soak's did."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> int:
        with HELD:
            return index


def test_a_loader_worker_never_inherits_a_lock_another_thread_of_the_rank_holds(monkeypatch):
    """The soak's hang (results/soak-cpu): a rank's DataLoader worker that never ran a line of Python, the
    rank's other threads running. A worker forked from the rank while one of them holds a lock waits for it
    forever; ours start from a forkserver and read every sample. The forked control proves the test can fail."""
    from torch_impl import data as torch_data

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with HELD:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold, daemon=True)
    holder.start()
    held.wait()
    try:
        options = torch_data.loader_options(LockedSamples(), workers=1, pin_memory=False)
        assert options["multiprocessing_context"].get_start_method() == "forkserver"
        assert list(DataLoader(LockedSamples(), batch_size=None, timeout=120, **options)) == [0, 1, 2, 3]
        # The forked worker waits for HELD forever: its loader's shutdown gives it 0.2 s, not 5, before the kill.
        monkeypatch.setattr(torch.utils.data._utils, "MP_STATUS_CHECK_INTERVAL", 0.2)
        forked = DataLoader(LockedSamples(), batch_size=None, num_workers=1, timeout=3, multiprocessing_context="fork")
        with pytest.raises(RuntimeError, match="timed out"):
            list(forked)
    finally:
        release.set()
        holder.join()


def test_a_val_split_folder_read_as_files_holds_out_what_memory_holds_out(tmp_path):
    from PIL import Image

    from torch_impl import files

    for cls in ("a", "b"):
        (tmp_path / cls).mkdir()
        for i in range(10):
            Image.new("L", (8, 8), i * 20 + (cls == "b")).save(tmp_path / cls / f"{i}.png")
    task = imagefolder.describe(get_task("quick", dataset="imagefolder", data_dir=str(tmp_path), val_split=0.2))
    memory = imagefolder.read(task)
    train, test = files.folder_splits(task, str(tmp_path))
    assert np.array_equal(np.stack([x.numpy() for x, _ in test]), memory["test_x"])
    assert [y for _, y in train] == memory["train_y"].tolist()


def test_the_image_folder_reader_skips_what_every_pipeline_skips(tmp_path):
    """Hidden folders (.ipynb_checkpoints) and subfolders of a class are no classes and no images, for
    torchvision's ImageFolder as for the in-memory reader and the S3 listing."""
    from PIL import Image

    from torch_impl import files

    for split in ("train", "test"):
        for cls in ("a", "b", ".ipynb_checkpoints"):
            (tmp_path / split / cls / "nested").mkdir(parents=True)
            for i in range(3):
                Image.new("L", (8, 8), i).save(tmp_path / split / cls / f"{i}.png")
            Image.new("L", (8, 8), 9).save(tmp_path / split / cls / "nested" / "9.png")
    task = imagefolder.describe(get_task("quick", dataset="imagefolder", data_dir=str(tmp_path)))
    train, _ = files.folder_splits(task, str(tmp_path))
    assert train.classes == ["a", "b"] and [y for _, y in train.samples] == imagefolder.read(task)["train_y"].tolist()


def test_a_run_keeps_its_temp_files_but_not_its_sockets(tmp_path):
    import socket

    from bench.run.execute import keep_temp

    temp = tmp_path / "dtbench-abc123"
    (temp / "torchelastic_x").mkdir(parents=True)
    (temp / "torchelastic_x" / "error.json").write_text("{}")
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(temp / "listener-1"))
        keep_temp(temp, tmp_path / "run" / "tmp")
    assert (tmp_path / "run" / "tmp" / "torchelastic_x" / "error.json").exists()
    assert not (tmp_path / "run" / "tmp" / "listener-1").exists() and not temp.exists()


def test_a_row_names_the_s3_endpoint_without_its_user_and_password(monkeypatch):
    from bench.worker import s3

    monkeypatch.setenv("AWS_ENDPOINT_URL", "https://user:pa55@minio.example:9000/")
    assert s3.endpoint_label() == "https://minio.example:9000"


def test_an_s3_prefix_lists_and_decodes_as_the_folder_it_was_uploaded_from(s3_server, s3_sample, monkeypatch):
    from torch_impl import files

    url, folder = s3_sample
    for name, value in s3_server.env().items():
        monkeypatch.setenv(name, value)
    task = get_task("quick", input="s3", data_url=url)
    remote, local = imagefolder.listing(task, url), imagefolder.listing(task, str(folder))
    assert remote.classes == local.classes == [str(label) for label in range(10)]
    for split in ("train", "test"):
        assert [k.rsplit("/", 1)[-1] for k in remote.files[split]] == [f.rsplit("/", 1)[-1] for f in local.files[split]]
        assert np.array_equal(remote.labels[split], local.labels[split])
    # s3torchconnector's map-style datasets against torchvision's ImageFolders of the same images
    for from_s3, from_disk in zip(files.s3_splits(task, url), files.folder_splits(task, str(folder))):
        assert len(from_s3) == len(from_disk) > 0
        for index in range(len(from_s3)):
            (s3_image, s3_label), (disk_image, disk_label) = from_s3[index], from_disk[index]
            assert np.array_equal(s3_image.numpy(), disk_image.numpy()) and s3_label == disk_label


@pytest.mark.parametrize("args, message", [
    (["--loader-workers", "2"], "--loader-workers goes with --input files or s3"),
    (["--input", "s3"], "pass --data-url s3://BUCKET/PREFIX"),
    (["--data-url", "s3://b/p"], "--data-url goes with --input s3"),
    (["--input", "files", "--task", "resnet50"], "it has no images for --input files"),
    (["--input", "files,memory"], "bench run takes one --input"),
    (["--input", "files", "--loader-workers", "-1"], "--loader-workers must be at least 0"),
    (["--input", "files", "--loader-workers", "two"], "give counts, e.g. 2 or 0,1,2"),
    (["--input", "tape"], "unknown input 'tape'"),
    (["--input", ","], "--input and --loader-workers need a value each"),
    (["--input", "files", "--loader-workers", "1", "--engine", "dask"], "cannot start DataLoader workers"),
])
def test_input_options_are_checked_before_anything_starts(tmp_path, args, message):
    result = cli("run", "--variant", "torch-ddp", "--task", "quick", "--out", str(tmp_path), *args, env=CPU)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert not (tmp_path / "results.jsonl").exists()


@pytest.mark.parametrize("problem, message", [
    ("unreachable", "cannot reach the S3 endpoint http://127.0.0.1:9"),
    ("missing bucket", "bucket of s3://nobucket/sample does not exist"),
    ("wrong secret", "refused the credentials for s3://dtbench/sample (SignatureDoesNotMatch)"),
    ("unknown key", "refused the credentials for s3://dtbench/sample (InvalidAccessKeyId)"),
    ("empty prefix", "s3://dtbench/nothing-here holds no objects"),
    ("not an image folder", "image folder s3://dtbench/sample/train/3 has no train/ and test/"),
    ("another task's images", "holds 10 classes of 8px 1-channel images, task default trains 10 classes of 28px"),
])
def test_bad_s3_sources_are_one_line_and_exit_2_before_any_run_without_the_secret(s3_server, s3_sample, tmp_path,
                                                                                   problem, message):
    env, url, task = {}, s3_sample[0], "quick"
    if problem == "unreachable":
        env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9"}  # nothing listens on the discard port
    elif problem == "missing bucket":
        url = "s3://nobucket/sample"
    elif problem == "wrong secret":
        env = {"AWS_SECRET_ACCESS_KEY": "not-the-secret"}
    elif problem == "unknown key":
        env = {"AWS_ACCESS_KEY_ID": "AKIANOSUCHKEY0000000"}
    elif problem == "empty prefix":
        url = "s3://dtbench/nothing-here"
    elif problem == "not an image folder":
        url = s3_sample[0] + "/train/3"
    else:
        task = "default"
    # The timeout: refused before any run starts, with no retries backing off for minutes.
    result = bench("run", "--variant", "torch-ddp", "--task", task, "--input", "s3", "--data-url", url,
                   "--out", str(tmp_path), env={**CPU, **s3_server.env(**env)}, timeout=180)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert message in line
    assert s3_server.secret not in result.stdout + result.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_an_s3_server_gone_between_the_listing_and_a_read_is_one_line(monkeypatch):
    """The soak stopped the S3 server after the check had listed the prefix, before it read the first image:
    the sweep printed botocore's traceback. A read that cannot reach the server is one line naming the fix."""
    from bench.spec.task import SpecError
    from bench.worker import s3

    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # nothing listens on the discard port
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLE000000000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-a-secret")
    with pytest.raises(SpecError, match=r"^cannot reach the S3 endpoint http://127.0.0.1:9 for "
                                        r"s3://dtbench/quick/train/3/7.png: start the server"):
        s3.read_object("s3://dtbench/quick", "train/3/7.png")


def test_export_to_s3_refuses_a_prefix_that_already_holds_objects(s3_server, s3_sample):
    result = cli("data", "export-images", "--task", "quick", s3_sample[0], env=s3_server.env())
    assert result.returncode == 2
    assert "already holds objects: export under a new prefix" in result.stderr


def test_the_s3_server_listens_on_loopback_only_and_stops(tmp_path):
    from tests.s3server import S3Server

    server = S3Server()
    try:
        addresses = listeners_of(server.process.pid)
        assert addresses and all(is_loopback(a) for a in addresses), addresses
    finally:
        server.stop()
    assert server.process.poll() is not None and not os.path.exists(f"/proc/{server.process.pid}/status")


def test_a_sweep_runs_every_input_pipeline_each_measuring_its_own_input_cost():
    modes = [{"input": "memory", "loader_workers": 0, "data_url": None},
             {"input": "files", "loader_workers": 0, "data_url": None},
             {"input": "files", "loader_workers": 2, "data_url": None},
             {"input": "s3", "loader_workers": 1, "data_url": "s3://b/p"}]
    specs = plan.plan([get_variant("torch-ddp")], get_task("quick"), "cpu", [1, 2], analysis=True, inputs=modes)
    one = [(s.task.data.input, s.task.data.loader_workers, s.task.timing.input_phases) for s in specs
           if s.world_size == 1]
    # PyTorch's loop times its input's cost in the run's own phases: no synthetic twin is launched for it.
    assert one == [("memory", 0, True), ("files", 0, True), ("files", 2, True), ("s3", 1, True)]
    # On two ranks DDP measures its exposed communication in the same phases: no no-sync run either.
    assert all(s.task.timing.input_phases for s in specs) and not any(s.independent for s in specs)
    keys = {s.key for s in specs if not s.independent}
    assert len(keys) == len([s for s in specs if not s.independent])  # every pipeline its own configuration
    s3_run = next(s for s in specs if s.task.data.input == "s3")
    assert s3_run.task.data.data_url == "s3://b/p" and s3_run.key.series == "torch-ddp (s3, 1 worker)"


def test_a_row_keys_its_input_pipeline():
    row = {"variant": "tf-mirrored", "engine": "local", "device_type": "cpu", "nodes": 1, "devices_per_node": 2,
           "task": {"name": "default", "global_batch": 128, "input": "files", "loader_workers": 2}}
    key = config_key(row)
    assert key.loader_workers == 2 and key.series == "tf-mirrored (files, 2 workers)"
    assert key != config_key({**row, "task": {**row["task"], "loader_workers": 0}})


def test_the_report_sets_the_input_pipelines_side_by_side(tmp_path):
    from bench.report import report
    from bench.results import ResultStore
    from helpers import result_row

    store = ResultStore(tmp_path)
    for world in (1, 2):
        for mode, workers, median in (("memory", 0, 1000.0), ("files", 2, 500.0), ("s3", 1, 250.0)):
            task = {"name": "quick", "dataset": "digits", "model": "small-cnn", "precision": "fp32",
                    "global_batch": 64, "input": mode, "loader_workers": workers}
            store.append(dataclasses.replace(result_row("torch-ddp", world, median * world, task=task,
                                                        test_accuracy=0.9), run_id=f"{mode}{world}"))
    text = report.write_report(Folder.read(tmp_path)).read_text()
    table = text.split("### Input pipelines")[1].split("###")[0]
    assert "| memory" in table and "files, 2 workers" in table and "s3, 1 worker" in table
    assert "500 (0.50x) · 90.00%" in table and "500 (0.25x) · 90.00%" in table
    assert (tmp_path / "quick-fp32-strong-input.png").exists()


@pytest.mark.slow
@pytest.mark.parametrize("variant, modes", [
    ("torch-ddp", [("memory", 0), ("files", 0), ("files", 2), ("s3", 1)]),
    ("tf-mirrored", [("memory", 0), ("files", 2), ("s3", 2)]),
])
def test_memory_files_and_s3_train_the_same_images_to_the_same_accuracy(s3_server, s3_digits, tmp_path, variant,
                                                                         modes):
    out = tmp_path / "out"
    for mode, workers in modes:
        url = ["--data-url", s3_digits] if mode == "s3" else []
        result = bench("run", "--variant", variant, "--devices", "2", "--task", "quick", "--input", mode,
                       "--loader-workers", str(workers), *url, "--out", str(out), "--timeout", "240",
                       env={**CPU, **s3_server.env()})
        assert result.returncode == 0, result.stderr[-3000:]
    found = rows(out)
    assert [(r["task"]["input"], r["task"]["loader_workers"], r["status"]) for r in found] == \
        [(m, w, "ok") for m, w in modes]
    assert all(r["memory"]["model_state_bytes"]["0"]["parameters"] > 0 for r in found)  # counted by both frameworks
    accuracies = [r["test_accuracy"] for r in found]
    assert max(accuracies) - min(accuracies) <= 0.005, accuracies
    assert all(r["eval_samples"] == 397 for r in found)
    for r in found:
        if r["task"]["loader_workers"]:
            assert any("loader worker(s) decode on the slot's" in n for n in r["notes"])
    leaked = [p for p in out.rglob("*") if p.is_file() and s3_server.secret.encode() in p.read_bytes()]
    assert not leaked
    assert "### Input pipelines" in (out / "report.md").read_text() if (out / "report.md").exists() else \
        "### Input pipelines" in bench("report", str(out)).stdout


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-ddp", "tf-mirrored"])
def test_a_corrupt_image_fails_the_run_naming_the_file(tmp_path, variant):
    folder = tmp_path / "digits"
    assert bench("data", "export-images", "--task", "quick", str(folder)).returncode == 0
    (folder / "train" / "3" / "000100.png").write_bytes(b"not an image")
    out = tmp_path / "out"
    result = bench("run", "--variant", variant, "--devices", "2", "--task", "quick", "--dataset", "imagefolder",
                   "--data-dir", str(folder), "--input", "files", "--loader-workers", "1", "--out", str(out), env=CPU)
    assert result.returncode == 1
    [row] = rows(out)
    assert row["status"] == "failed" and "train/3/000100.png" in row["error"] and "corrupt image" in row["error"]
