"""Memory per rank as a result: the model state each rank holds (what sharding saves), counted from the
tensors' storages, in the row and the report; what torch-fsdp refuses. The share each sharded approach holds,
measured on real runs, is test_sharded_variants'."""
import dataclasses

import pytest
import torch
from torch import nn

from bench.metrics import memory as memory_metric
from bench.analysis.folder import Folder
from helpers import CPU, cli, result_row


def test_model_state_counts_parameters_gradients_and_momentum_once_each():
    from torch_impl.memory import model_state_bytes

    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.randn(4, 10)).sum().backward()
    optimizer.step()
    size = 4 * sum(p.numel() for p in model.parameters())
    assert model_state_bytes(model, optimizer) == {"parameters": size, "gradients": size, "optimizer": size}
    optimizer.zero_grad(set_to_none=True)
    assert model_state_bytes(model, optimizer)["gradients"] == 0


def test_a_rank_reads_the_peaks_of_its_own_gpu_and_dataparallel_of_every_visible_one(monkeypatch):
    """A torchrun rank sees every GPU of its node: a stray allocation on another one must not be read as a
    second device's peak (the report would call the first figure device 0). Faked allocator counters: no GPU."""
    from torch_impl import memory

    allocated = {0: 7 * 2**20, 1: 3 * 2**20, 2: 5 * 2**20, 3: 0}
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 2)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda i: allocated[i])
    monkeypatch.setattr(torch.cuda, "max_memory_reserved", lambda i: 2 * allocated[i])
    assert memory.gpus(torch.device("cpu")) == [] and memory.device_peaks(torch.device("cpu")) == {}
    assert memory.gpus(torch.device("cuda", 1)) == [1] and memory.gpus(torch.device("cuda")) == [2]
    assert memory.device_peaks(torch.device("cuda", 1)) == {
        "peak_allocated_mb": 3.0, "peak_reserved_mb": 6.0, "peak_allocated_mb_by_device": [3.0]}
    dataparallel = memory.device_peaks(torch.device("cuda", 0), every_visible=True)
    assert dataparallel["peak_allocated_mb_by_device"] == [7.0, 3.0, 5.0, 0.0]
    assert dataparallel["peak_allocated_mb"] == 7.0 and dataparallel["peak_reserved_mb"] == 14.0


def test_the_fold_keeps_every_ranks_model_state_and_the_largest_device_peak():
    per_rank = {0: {"model_state_bytes": {"parameters": 8, "gradients": 8, "optimizer": 0}, "peak_allocated_mb": 3.0},
                1: {"model_state_bytes": {"parameters": 4, "gradients": 4, "optimizer": 0}, "peak_allocated_mb": 5.0}}
    folded = memory_metric.per_rank(per_rank)
    assert folded["model_state_bytes"]["1"]["parameters"] == 4 and folded["peak_allocated_mb"] == 5.0
    assert memory_metric.per_rank({0: {}}) == {}
    assert "peak_allocated_mb_by_device" not in folded  # no rank said which device peaked where


def test_the_fold_lists_every_devices_peak_from_one_process_or_a_device_per_rank():
    dataparallel = memory_metric.per_rank({0: {"peak_allocated_mb": 9.0, "peak_allocated_mb_by_device": [9.0, 4.0, 4.5]}})
    assert dataparallel["peak_allocated_mb_by_device"] == [9.0, 4.0, 4.5]
    ranks = memory_metric.per_rank({1: {"peak_allocated_mb": 5.0, "peak_allocated_mb_by_device": [5.0]},
                         0: {"peak_allocated_mb": 6.0, "peak_allocated_mb_by_device": [6.0]}})
    assert ranks["peak_allocated_mb_by_device"] == [6.0, 5.0]  # rank order, whatever order they arrived in
    one = memory_metric.per_rank({0: {"peak_allocated_mb": 6.0, "peak_allocated_mb_by_device": [6.0]}})
    assert "peak_allocated_mb_by_device" not in one  # one device: nothing to set against it


def test_the_report_sets_dataparallels_device_0_against_the_others_and_names_it(tmp_path):
    from bench.report import report
    from bench.results import ResultStore

    store = ResultStore(tmp_path)
    task = {"name": "resnet50", "dataset": "synthetic", "model": "resnet50", "precision": "bf16", "global_batch": 256}
    parts = {"parameters": 2**20, "gradients": 2**20, "optimizer": 2**20}
    for variant, by_device in (("torch-dp", [9_000.0, 5_000.0, 5_200.0, 5_100.0]),
                               ("torch-ddp", [6_000.0, 6_010.0, 5_990.0, 6_000.0])):
        memory = {"model_state_bytes": {"0": parts}, "peak_allocated_mb": max(by_device),
                  "peak_allocated_mb_by_device": by_device}
        row = result_row(variant, 4, 4000.0, task=task, device_type="cuda", memory=memory)
        store.append(dataclasses.replace(row, run_id=variant))
    text = report.write_report(Folder.read(tmp_path)).read_text()
    section = text.split("### Memory per device")[1].split("###")[0]
    assert "device 0 · others' largest (MiB)" in section
    assert "9,000 · 5,200 (+73%)" in section and "6,000 · 6,010 (±0%)" in section
    named = [line for line in section.splitlines() if "device 0 peaked" in line]
    assert len(named) == 1 and named[0].startswith("torch-dp on 4 devices") and "the others at most 5,200" in named[0]
    verdict = text.split("### Memory per device")[0]
    assert "torch-dp on 4 devices: device 0 peaked at 9,000 MiB" in verdict  # in the verdict's notes too


def test_the_report_compares_each_ranks_model_state_with_one_devices(tmp_path):
    from bench.report import report
    from bench.results import ResultStore

    store = ResultStore(tmp_path)
    task = {"name": "quick", "dataset": "digits", "model": "small-cnn", "precision": "fp32", "global_batch": 64}
    mib = 2**20
    for variant, world, state in (("torch-ddp", 1, 3 * mib), ("torch-ddp", 2, 3 * mib),
                                  ("torch-fsdp", 1, 3 * mib), ("torch-fsdp", 2, 1.5 * mib)):
        parts = {"parameters": state / 3, "gradients": state / 3, "optimizer": state / 3}
        row = result_row(variant, world, 1000.0 * world, task=task, peak_memory_mb=200.0,
                         memory={"model_state_bytes": {str(r): parts for r in range(world)}})
        store.append(dataclasses.replace(row, run_id=f"{variant}{world}"))
    text = report.write_report(Folder.read(tmp_path)).read_text()
    table = text.split("### Memory per device")[1].split("###")[0]
    assert "| torch-fsdp | 2         | 1.50" in table and "0.50" in table
    assert "| torch-ddp  | 2         | 3.00" in table and "1.00 · 1.00 · 1.00" in table
    assert (tmp_path / "quick-fp32-strong-memory.png").exists()


@pytest.mark.parametrize("args, message", [
    (["--checkpoint-every-epoch"], "torch-fsdp does not checkpoint yet"),
    (["--independent", "--devices", "2"], "torch-fsdp has no independent (no gradient sync) mode"),
    (["--engine", "ray"], "torch-fsdp runs only under its own launcher"),
])
def test_what_torch_fsdp_does_not_do_is_refused_in_one_line(tmp_path, args, message):
    result = cli("run", "--variant", "torch-fsdp", "--task", "quick", "--out", str(tmp_path), *args, env=CPU)
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert message in line
