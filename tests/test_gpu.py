"""On a CUDA machine: every torch variant trains on the GPU it was given, with nccl, synchronised clocks
and the precision GPUs default to. Skipped with a reason where no GPU is visible (CI has none)."""
from __future__ import annotations

import pytest

from bench.spec import devices
from helpers import bench, rows

MACHINE = devices.discover()
pytestmark = [pytest.mark.gpu, pytest.mark.slow,
              pytest.mark.skipif(not MACHINE.gpus, reason="needs a CUDA GPU: nvidia-smi finds none here")]

TORCH_VARIANTS = ("torch-single", "torch-dp", "torch-ddp", "torch-fsdp", "accelerate")


@pytest.mark.parametrize("variant", TORCH_VARIANTS)
def test_variant_trains_on_the_gpu(variant, out):
    result = bench("run", "--variant", variant, "--devices", "1", "--task", "quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["device_type"] == "cuda"
    assert row["task"]["precision"] == "bf16"  # GPUs default to bf16
    assert row["device_name"] == MACHINE.gpu_names[0]
    assert row["environment"]["device"] == "cuda:0"
    # The node saw exactly the first visible GPU, whatever the process itself reports.
    assert set(row["environment"]["cuda_visible"].values()) == {MACHINE.gpus[0]}
    assert row["eval_samples"] == 397 and row["test_accuracy"] > 0.5
    assert row["peak_memory_mb"] > 0


def test_ddp_on_gpu_uses_nccl(out):
    result = bench("run", "--variant", "torch-ddp", "--devices", "1", "--task", "quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    assert row["environment"]["backend"] == "nccl"
    assert row["environment"]["nccl"]


def test_more_gpus_than_visible_is_refused(out):
    result = bench("run", "--variant", "torch-ddp", "--devices", str(len(MACHINE.gpus) + 1), "--task", "quick",
                   "--out", str(out))
    assert result.returncode == 2
    assert "GPUs but" in result.stderr and "lower GPUS" in result.stderr
    assert rows(out) == []


# The approaches issue 14 added, each on one GPU with ResNet-50 (synthetic): the memory columns filled.
SHARDED_RUNS = [("torch-fsdp",), ("lightning",), ("deepspeed", "--zero-stage", "1"), ("deepspeed", "--zero-stage", "2"),
                ("deepspeed", "--zero-stage", "3"), ("accelerate", "--accelerate-plugin", "fsdp"),
                ("accelerate", "--accelerate-plugin", "deepspeed")]


@pytest.mark.parametrize("args", SHARDED_RUNS, ids=lambda args: "-".join(args).replace("--", ""))
def test_sharded_and_new_variants_train_resnet50_on_one_gpu_with_memory_recorded(args, out):
    result = bench("run", "--variant", *args, "--devices", "1", "--task", "resnet50", "--global-batch", "64",
                   "--windows", "2", "--out", str(out), timeout=590)
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["device_type"] == "cuda" and row["task"]["precision"] == "bf16"
    memory = row["memory"]
    assert 0 < memory["peak_allocated_mb"] <= memory["peak_reserved_mb"]
    state = memory["model_state_bytes"]["0"]
    # One rank holds the whole model: 25.6 M parameters, in fp32 or bf16 (with room for padding).
    assert 1.9 * 25_557_032 <= state["parameters"] <= 4.1 * 25_557_032
    assert state["optimizer"] > 0


@pytest.mark.skipif(len(MACHINE.gpus) < 2, reason="needs two CUDA GPUs: DataParallel's device 0 against another")
def test_dataparallel_records_each_gpus_peak_and_the_report_sets_device_0_against_the_others(out):
    result = bench("run", "--variant", "torch-dp", "--devices", "2", "--task", "resnet50", "--global-batch", "128",
                   "--windows", "2", "--out", str(out), timeout=590)
    assert result.returncode == 0, result.stderr[-2000:]
    [row] = rows(out)
    first, second = row["memory"]["peak_allocated_mb_by_device"]
    assert first > second > 0  # device 0 also holds the module's master copy and the gathered outputs
    assert row["memory"]["peak_allocated_mb"] == first
    report = bench("report", str(out))
    assert report.returncode == 0 and f"{first:,.0f} · {second:,.0f}" in report.stdout


@pytest.mark.parametrize("variant", ["torch-ddp", "torch-dp"])
def test_a_device_memory_budget_caps_the_cuda_allocator(variant, out):
    """--device-memory on CUDA: torch.cuda.set_per_process_memory_fraction on each GPU the process drives. A
    ResNet-50 at a batch that fits the whole GPU does not fit 0.25 GiB of it: recorded as such, with the
    allocation the caching allocator refused, never a crash."""
    result = bench("run", "--variant", variant, "--devices", "1", "--task", "resnet50", "--input", "synthetic",
                   "--global-batch", "64", "--epochs", "1", "--device-memory", "0.25", "--out", str(out))
    assert result.returncode == 1, result.stderr[-2000:]
    [row] = rows(out)
    assert row["status"] == "does not fit", row["error"]
    assert "out of memory" in row["error"].lower() and row["memory"]["refused_allocation_mb"] > 0
