"""A sweep over models, from fabricated rows: throughput per device against model size, and where one approach
overtakes another as models grow."""
import pytest

from bench.report import model_size, report
from bench.results import ResultStore
from bench.analysis.folder import Folder
from helpers import result_row

SIZES = {"small-cnn": 100_000, "timm:resnet18": 11_200_000, "timm:vit_base_patch16_224": 86_000_000}


def row(variant, model, per_device):
    return result_row(variant, 2, median=2 * per_device, run_id=f"{variant}-{model}", per_device_throughput=per_device,
                      task={"name": "quick", "model": model, "dataset": "digits", "global_batch": 64, "precision": "fp32",
                            "params": SIZES[model]}, test_accuracy=0.9)


def test_a_sweep_over_models_draws_throughput_against_size_and_names_the_crossover(tmp_path):
    store = ResultStore(tmp_path)
    for r in (row("torch-ddp", "small-cnn", 4000.0), row("torch-fsdp", "small-cnn", 2000.0),
              row("torch-ddp", "timm:resnet18", 300.0), row("torch-fsdp", "timm:resnet18", 250.0),
              row("torch-ddp", "timm:vit_base_patch16_224", 20.0), row("torch-fsdp", "timm:vit_base_patch16_224", 40.0)):
        store.append(r)
    text = report.write_report(Folder.read(tmp_path)).read_text()
    # Each model its own answer, as each task has.
    for model, answer in (("small-cnn at 8 px", "torch-ddp (8,000"), ("timm:resnet18", "torch-ddp (600"),
                          ("timm:vit_base_patch16_224", "torch-fsdp (80 ")):
        assert f"**2 CPU slots, quick task ({model}), fp32, strong scaling: use {answer}" in text, model
    assert "### Throughput against model size" in text
    assert "(1) On 2 devices, torch-fsdp overtakes torch-ddp between 11.2 M and 86.0 M parameters." in text
    assert (tmp_path / "quick-fp32-strong-model-size.png").read_bytes()[:4] == b"\x89PNG"


def test_the_crossing_is_where_the_two_lines_meet_in_log_space():
    [c] = model_size.crossovers({2: {"a": [(1e6, 100.0), (1e8, 10.0)], "b": [(1e6, 10.0), (1e8, 100.0)]}})
    assert (c.ahead, c.behind) == ("b", "a")
    assert c.params == pytest.approx(1e7) and c.throughput == pytest.approx(10 ** 1.5)
    assert model_size.crossovers({2: {"a": [(1e6, 100.0), (1e8, 90.0)], "b": [(1e6, 10.0), (1e8, 20.0)]}}) == []


def test_a_crossing_between_sizes_where_the_two_tie_is_none():
    lines = {2: {"a": [(1e6, 100.0), (1e8, 10.0)], "b": [(1e6, 10.0), (1e8, 100.0)]}}
    assert model_size.crossovers(lines, lambda devices, a, b, params: params != 1e8) == []
    assert len(model_size.crossovers(lines, lambda devices, a, b, params: True)) == 1
