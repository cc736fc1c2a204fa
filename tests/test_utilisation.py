"""How close to the hardware: FLOPs counted per sample, the peaks, MFU arithmetic, --compile refused
where the stack cannot compile, the input wait, and the report's utilisation section."""
import json
import math
import os
import subprocess
import sys
import time

import pytest

from bench.report import report
import pandas as pd

from bench.results import load, peak, utilisation
from bench.analysis import aggregate
from bench.analysis.folder import Folder
from bench.results import ResultStore
from bench.results.frame import frame
from bench.spec.peaks import dense_peak, matmul_precision
from bench.spec.task import get_task
from bench.worker.clock import StepClock
from helpers import CPU, REPO, bench, cli, result_row

KERAS_FLOPS = """
import json, sys
from bench.spec.task import get_task
from tf_impl.flops import flops_per_sample
from tf_impl.model import build_model
print(flops_per_sample(build_model(get_task(sys.argv[1], **json.loads(sys.argv[2])))))
"""


def conv_flops(k, c_in, c_out, side):
    return 2 * k * k * c_in * c_out * side * side


def test_flops_of_the_small_cnn_match_the_layer_formulas():
    from torch_impl.flops import flops_per_sample

    # quick: 8x8x1 images; conv 3x3 1->16 at 8x8, pool, conv 3x3 16->32 at 4x4, pool, fc 128->64, fc 64->10.
    forward = [conv_flops(3, 1, 16, 8), conv_flops(3, 16, 32, 4), 2 * 128 * 64, 2 * 64 * 10]
    # Backward: weight and input gradients, but the first layer's input (the images) needs none.
    expected = 2 * forward[0] + sum(3 * f for f in forward[1:])
    assert flops_per_sample(get_task("quick")) == expected == 532224


def test_counting_flops_leaves_the_random_state_as_it_was():
    import torch

    from torch_impl.flops import flops_per_sample

    torch.manual_seed(123)
    before = torch.random.get_rng_state()
    flops_per_sample(get_task("default"))
    assert torch.equal(torch.random.get_rng_state(), before)


@pytest.mark.slow
@pytest.mark.parametrize("task,model", [
    ("quick", {}), ("default", {}), ("mnist-cnn", {}), ("databricks-mnist", {}),
    # Depthwise and grouped convolutions, and dense layers over every position (ConvNeXt's MLP): torch's own
    # formula counts a grouped convolution's weight gradient once per group.
    *(("quick", {"model": m, "image_size": 32, "channels": 3}) for m in ("efficientnet_b0", "convnext_tiny",
                                                                         "mobilenetv2_100"))])
def test_keras_and_torch_flop_counts_agree_for_parameter_equal_models(task, model):
    from torch_impl.flops import flops_per_sample

    keras = subprocess.run([sys.executable, "-c", KERAS_FLOPS, task, json.dumps(model)], cwd=REPO,
                           capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **CPU})
    assert keras.returncode == 0, keras.stderr
    torch_count = flops_per_sample(get_task(task, **model))
    assert float(keras.stdout.split()[-1]) == pytest.approx(torch_count, rel=0.02)


def test_data_sheet_peaks_by_device_name_and_matmul_precision():
    assert dense_peak("NVIDIA H100 80GB HBM3", "bf16") == pytest.approx(989.4e12)
    assert dense_peak("NVIDIA H100 PCIe", "bf16") == pytest.approx(756e12)
    assert dense_peak("NVIDIA A100-SXM4-80GB", "tf32") == pytest.approx(156e12)
    assert dense_peak("NVIDIA L40S", "bf16") == pytest.approx(362.05e12)
    assert dense_peak("NVIDIA L4", "fp32") == pytest.approx(30.3e12)  # not taken for an L40S, nor the reverse
    assert dense_peak("NVIDIA L40", "bf16") == pytest.approx(181.05e12)
    assert dense_peak("NVIDIA A10G", "bf16") is None and dense_peak("AMD EPYC", "fp32") is None
    assert dense_peak("Tesla V100-SXM2-16GB", "bf16") is None  # no bf16 on Volta
    assert matmul_precision("fp32", tf32=True) == "tf32" and matmul_precision("bf16", tf32=True) == "bf16"
    assert matmul_precision("fp32", tf32=False) == "fp32"


def test_mfu_arithmetic():
    # The figure: ResNet-50 at 2,232 images/s on an H100, ~24.3 GFLOP per training image.
    assert utilisation.fraction(24.3e9, 2232, dense_peak("NVIDIA H100 80GB HBM3", "bf16")) == pytest.approx(
        24.3e9 * 2232 / 989.4e12)
    assert utilisation.fraction(None, 2232, 1e15) is None and utilisation.fraction(1e9, 100, None) is None
    row = result_row("torch-ddp", 2, 1000.0, per_device_throughput=500.0, device_name="NVIDIA H100 80GB HBM3",
                     flops_per_sample=1e9, fast_path={"tf32": True},
                     task={"name": "default", "precision": "fp32", "global_batch": 128, "compile": True},
                     first_step_s=30.0)
    [line] = aggregate.configurations(frame([row.to_dict()])).to_dict("records")  # derived by the report
    assert line["matmul_precision"] == "tf32" and line["compile_s"] == 30.0  # a compiled run's first step
    assert line["achieved_tflops"] == pytest.approx(1.0) and line["mfu"] == pytest.approx(500 * 1e9 / 494.7e12)


def test_fraction_of_the_measured_peak_matches_the_slot():
    table = [{"device_type": "cpu", "device_name": "x", "threads": 1, "precision": "fp32", "flops_per_s": 50e9},
             {"device_type": "cpu", "device_name": "x", "threads": 2, "precision": "fp32", "flops_per_s": 90e9}]
    row = {"device_type": "cpu", "cores_per_slot": 1, "matmul_precision": "fp32", "flops_per_sample": 1e6,
           "per_device_throughput": 10_000.0}
    assert peak.fraction_of(row, table) == pytest.approx(1e10 / 50e9)
    assert peak.fraction_of({**row, "matmul_precision": "bf16"}, table) is None  # not measured at bf16


def test_compile_is_refused_where_no_compiler_can_build_it(out):
    no_compiler = {**CPU, "PATH": os.path.dirname(sys.executable)}
    result = cli("run", "--variant", "torch-single", "--task", "quick", "--compile", "--out", str(out),
                 env=no_compiler)
    assert result.returncode == 2 and "--compile needs a C++ compiler" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not (out / "results.jsonl").exists()


def test_compile_is_refused_for_dataparallel_over_several_gpus():
    from bench.run.runspec import RunSpec
    from bench.spec.devices import Machine
    from bench.spec.task import SpecError
    from bench.spec.variants import get_variant

    gpus = Machine(cores=tuple(range(8)), gpus=("0", "1"), gpu_names=("H100",) * 2)
    compiled = get_task("default", compile=True)
    with pytest.raises(SpecError, match="use torch-ddp --compile"):
        RunSpec(get_variant("torch-dp"), compiled, "cuda", 1, 2).check(gpus)
    RunSpec(get_variant("torch-ddp"), compiled, "cuda", 1, 2).check(gpus)  # DDP compiles as documented


def test_input_wait_counts_only_inside_windows():
    def slow_batches(n):
        for i in range(n):
            time.sleep(0.02)
            yield i

    clock = StepClock(warmup=2, window_steps=2, windows=2, samples_per_step=1, sync=lambda: None)
    clock.start()
    for _ in clock.timed(slow_batches(8)):
        pass
    # 4 timed steps waited ~0.02 s each; the 2 warm-up steps' waits and those after the last window are out.
    assert 4 * 0.02 <= clock.input_wait_s < 6 * 0.02
    assert clock.input_wait_s <= sum(clock.window_seconds)


def test_a_sweep_with_analysis_times_the_input_in_phases_or_adds_synthetic_twins_and_compiled_runs():
    from bench.sweep import plan
    from bench.spec.variants import get_variant

    specs = plan.plan([get_variant("torch-ddp")], get_task("default"), "cpu", [1, 2], analysis=True, compiled=True)
    keys = [s.key for s in specs]
    labels = [(k.series, k.world_size) for k in keys]
    # DDP trains each resident window's batches with its sync off and undoes them: its no-sync bound in the run.
    assert labels == [("torch-ddp", 1), ("torch-ddp (compiled)", 1), ("torch-ddp", 2), ("torch-ddp (compiled)", 2)]
    assert all(s.task.timing.input_phases for s in specs)
    static = plan.plan([get_variant("torch-fsdp")], get_task("default"), "cpu", [1, 2], analysis=True)
    assert [s.task.timing.input_phases for s in static] == [True, False]  # FSDP2 has no window to undo
    fabric = plan.plan([get_variant("lightning")], get_task("default"), "cpu", [1, 2], analysis=True)
    assert [s.task.timing.input_phases for s in fabric] == [True, True]  # Fabric's no_backward_sync
    # Keras fit takes the resident windows through its train function: no synthetic twin either.
    fit = plan.plan([get_variant("tf-mirrored-fit")], get_task("default"), "cpu", [1], analysis=True)
    assert [s.key.series for s in fit] == ["tf-mirrored-fit"] and fit[0].task.timing.input_phases
    # tf-ps's coordinator schedules each step onto whichever worker is free: its one-device run keeps its twin.
    ps = [s.key.series for s in plan.plan([get_variant("tf-ps")], get_task("default"), "cpu", [1], analysis=True)]
    assert ps == ["tf-ps (asynchronous)", "tf-ps (asynchronous) (synthetic)"]
    assert plan.plan([get_variant("tf-single")], get_task("default"), "cpu", [1], analysis=True)[0].task.timing.input_phases
    # The synthetic twin of a synthetic task would be the task itself: none.
    assert all(k.input == "memory" for k in (s.key for s in plan.plan(
        [get_variant("torch-ddp")], get_task("resnet50"), "cpu", [1], analysis=True)))


def test_report_says_how_close_to_the_hardware_and_where_the_rest_goes(tmp_path):
    task = {"name": "default", "model": "small-cnn", "dataset": "fashion-mnist", "precision": "fp32",
            "global_batch": 128, "params": 105866}
    figures = dict(flops_per_sample=6.5e6, cores_per_slot=1, device_name="cpu",
                   step_time_ms={"median": 20.0, "p90": 22.0})
    store = ResultStore(tmp_path)
    for r in (result_row("torch-ddp", 1, 5000.0, task=task, input_wait_fraction=0.01, **figures),
              result_row("torch-ddp", 1, 5100.0, task={**task, "input": "synthetic"}, **figures),
              result_row("torch-ddp", 2, 8000.0, task=task, input_wait_fraction=0.02, **figures),
              result_row("torch-ddp", 2, 10000.0, task=task, independent=True, **figures)):
        r.per_device_throughput = r.throughput["median"] / r.world_size
        store.append(r)
    (tmp_path / "peak.jsonl").write_text(json.dumps({"device_type": "cpu", "device_name": "cpu", "threads": 1,
                                                     "precision": "fp32", "side": 1024, "flops_per_s": 65e9}) + "\n")
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "### How close to the hardware" in text and "## Matmul peak (measured)" in text
    ddp2 = 6.5e6 * 4000 / 65e9
    assert f"torch-ddp on 2 device(s) reaches {ddp2:.1%} of the measured fp32 matmul peak" in text
    assert "gradient synchronisation costs 20% of its throughput" in text
    assert math.isclose(5000 / 5100, 0.98, abs_tol=0.005) and "| 0.98 " in text  # real / synthetic at 1 device
    assert (tmp_path / "default-fp32-strong-utilisation.png").stat().st_size > 10_000


@pytest.mark.slow
def test_a_run_after_the_peak_carries_flops_utilisation_and_input_wait(out):
    measured = bench("peak", "--out", str(out), env=CPU)
    assert measured.returncode == 0, measured.stderr
    peaks = [json.loads(line) for line in (out / "peak.jsonl").read_text().splitlines()]
    assert {p["precision"] for p in peaks} == {"fp32", "bf16"} and all(p["flops_per_s"] > 0 for p in peaks)
    result = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    row = json.loads((out / "results.jsonl").read_text().splitlines()[0])
    assert row["flops_per_sample"] == 532224 and "matmul_precision" not in row and "mfu" not in row
    assert 0 <= row["input_wait_fraction"] < 1
    [line] = aggregate.configurations(load(out), peak.load(out)).to_dict("records")  # derived by the report
    assert line["achieved_tflops"] == pytest.approx(532224 * row["throughput"]["median"] / 1e12)
    assert 0 < line["peak_fraction"] < 1 and pd.isna(line["mfu"])  # no data-sheet peak for a CPU
    assert line["matmul_precision"] == "fp32"
    assert row["fast_path"] == {"channels_last": False, "cudnn_benchmark": False, "tf32": False,
                                "fused_optimizer": False, "pin_memory": False, "compile": False,
                                "persistent_workers": False, "loader_start": None}
    assert "### How close to the hardware" in bench("report", str(out)).stdout


@pytest.mark.slow
@pytest.mark.parametrize("variant", ["torch-single", "tf-single"])
def test_a_compiled_run_keeps_its_compile_time_out_of_the_windows(out, variant):
    result = bench("run", "--variant", variant, "--task", "quick", "--compile", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["status"] == "ok" and row["task"]["compile"] and row["fast_path"]["compile"]
    assert row["first_step_s"] > 0 and row["test_accuracy"] > 0.5 and "compile_s" not in row
    [line] = aggregate.configurations(load(out)).to_dict("records")
    assert line["compile_s"] == row["first_step_s"]  # its compile time, which no window timed
    assert f"{variant} (compiled)" in result.stdout


def test_an_input_wait_its_twin_contradicts_comes_with_the_reason(tmp_path):
    """Three runs a side: the twin puts the input's cost near 25 %, the wait says 1 %: the report says which
    figure to read and why they differ."""
    task = {"name": "default", "model": "small-cnn", "dataset": "fashion-mnist", "precision": "fp32",
            "global_batch": 128, "params": 105866}
    store = ResultStore(tmp_path)
    for real, synthetic in ((3000.0, 4000.0), (3100.0, 4100.0), (2900.0, 3950.0)):
        store.append(result_row("torch-ddp", 1, real, task=task, input_wait_fraction=0.01,
                                flops_per_sample=6.5e6))
        store.append(result_row("torch-ddp", 1, synthetic, task={**task, "input": "synthetic"},
                                flops_per_sample=6.5e6))
    (tmp_path / "peak.jsonl").write_text(json.dumps({"device_type": "cpu", "device_name": "cpu", "threads": 1,
                                                     "precision": "fp32", "side": 1024, "flops_per_s": 65e9}) + "\n")
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "Read the synthetic twin's" in text
    line = next(line for line in text.splitlines() if line.startswith("- torch-ddp on 1 device(s): its synthetic twin"))
    assert "input wait at 1.0%" in line and "read the twin's gap" in line
    assert "| 0.75 [" in text  # real / synthetic with its interval from the runs
