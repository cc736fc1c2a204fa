"""The PyTorch approaches' GPU fast path, checked where it can be on a CPU: which switches a rank turns on (and the
audit's variables that turn each off), the fused optimizer step and what the row records of it, and the epoch
cap that sizes the GPU default."""
import pytest
import torch

from bench.spec.task import SpecError, get_task
from bench.spec.variants import FAST_PATH_SWITCHES
from torch_impl import data
from torch_impl.fast_path import CUDA_SWITCHES, switch_on
from torch_impl.recipe import make_optimizer
from torch_impl.train import Approach, fast_path, fused


@pytest.mark.parametrize("name", sorted(CUDA_SWITCHES))
def test_each_cuda_switch_is_on_on_cuda_off_on_a_cpu_and_the_audits_variable_decides_it(name, monkeypatch):
    monkeypatch.delenv(CUDA_SWITCHES[name], raising=False)
    assert switch_on(name, "cuda", shipped=False) and not switch_on(name, "cpu", shipped=False)
    assert not switch_on(name, "cuda", shipped=True)  # --as-shipped: torch's own defaults
    monkeypatch.setenv(CUDA_SWITCHES[name], "0")
    assert not switch_on(name, "cuda", shipped=False)
    monkeypatch.setenv(CUDA_SWITCHES[name], "1")
    assert switch_on(name, "cuda", shipped=True) and not switch_on(name, "cpu", shipped=False)


def test_the_audit_measures_every_cuda_switch_through_the_variable_the_rank_reads():
    audited = {s.env: s for s in FAST_PATH_SWITCHES if "cuda" in s.device_types}
    for name, env in CUDA_SWITCHES.items():
        assert env in audited, f"{name} is not audited on CUDA"
        assert audited[env].variant == "torch-single" and audited[env].device_types == ("cuda",)


def test_a_cpu_rank_records_no_cuda_switch_and_torch_keeps_its_defaults():
    settings = fast_path(torch.device("cpu"), get_task("quick"))
    assert not any(settings[name] for name in CUDA_SWITCHES) and settings["pin_memory"] is False


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "adamw"])
def test_the_fused_step_is_asked_for_and_the_row_records_what_ran(optimizer):
    model = torch.nn.Linear(3, 2)
    task = get_task("quick", optimizer=optimizer)
    assert fused(make_optimizer(model, task, fused=True)) and not fused(make_optimizer(model, task))


def test_fsdp2_keeps_the_default_step_and_contiguous_parameters():
    from torch_impl.fsdp import FSDPRank

    assert Approach.fused_optimizer and not FSDPRank.fused_optimizer and not FSDPRank.channels_last


def test_an_epoch_is_cut_at_the_tasks_steps_and_still_reads_its_own_order():
    task = get_task("default")
    assert task.steps_per_epoch(60_000) == 468
    assert task.replace(steps_per_epoch=20).steps_per_epoch(60_000) == 20
    assert task.replace(steps_per_epoch=1_000).steps_per_epoch(60_000) == 468
    batches = data.at_most([["a"], ["b"], ["c"]], 2)
    assert len(batches) == 2 and list(batches) == [["a"], ["b"]] and list(batches) == [["a"], ["b"]]
    assert data.at_most([1, 2], None) == [1, 2]
    with pytest.raises(SpecError, match="--steps-per-epoch must be at least 1"):
        task.replace(steps_per_epoch=0).validate()


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-single", "tf-single"])
def test_the_epoch_cap_reaches_each_frameworks_loop(tmp_path, variant):
    from helpers import CPU, bench, rows

    # 3 epochs of at most 6 steps: 18 steps, 2 warm-up, so 4 of the quick task's 5 windows of 4 fit.
    done = bench("run", "--variant", variant, "--task", "quick", "--steps-per-epoch", "6", "--out", str(tmp_path),
                 env=CPU)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = rows(tmp_path)
    assert row["status"] == "ok" and len(row["throughput"]["windows"]) == 4
    assert "4 of 5 timing windows fit in the 18 steps trained" in " ".join(row["notes"])
    assert row["eval_samples"] == 397  # the whole test set (digits: 397), however short the epochs


def test_a_synthetic_batch_is_made_normalised_once_and_the_step_takes_it_as_it_is():
    # Normalising it again each step cost the small CNN about 4 % of its step (probes/step_ab.py).
    task = get_task("quick", input="synthetic")
    [(images, labels)] = data.synthetic_batches(task, 16, torch.device("cpu"), 1, 0)
    assert images.dtype == torch.float32 and images.shape == (16, 1, 8, 8)
    assert -1.0 <= float(images.min()) and float(images.max()) <= 1.0  # (x/255 - 0.5) / 0.5
    assert data.to_model_input(images, torch.device("cpu")) is images
    raw = torch.zeros((2, 8, 8, 1), dtype=torch.uint8)
    assert data.to_model_input(raw, torch.device("cpu")).dtype == torch.float32
