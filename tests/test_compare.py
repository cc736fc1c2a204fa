"""`bench compare`: several machines' results folders side by side, each machine named by its recorded environment,
a configuration that ran on several machines in one row, ratios only within a machine. No training run."""
from __future__ import annotations

from pathlib import Path

import pytest

from bench import compare
from bench.results import ResultStore
from helpers import REPO, cli, result_row

XEON = {"cpu_model": "Intel(R) Xeon(R) Gold 6338 CPU", "cores_available": 8, "python": "3.11.7",
        "libraries": {"torch": "2.5.0"}}
A100 = {"cpu_model": "AMD EPYC 7763", "cores_available": 64, "gpu_model": "NVIDIA A100-SXM4-40GB", "gpu_count": 4,
        "driver": "550.54", "cuda": "12.4", "python": "3.12.3", "libraries": {"torch": "2.5.0"}}


def row(variant: str, world: int, median: float, env: dict, device_type: str = "cpu", precision: str = "fp32",
        **fields):
    """An ok run with ten windows around `median` (so that ratios get their bootstrap interval)."""
    windows = [median * (1 + d) for d in (-0.02, -0.01, 0.0, 0.01, 0.02, -0.015, 0.015, -0.005, 0.005, 0.0)]
    return result_row(variant, world, median, device_type=device_type, environment=env, host="box",
                      device_name=env.get("gpu_model") if device_type == "cuda" else env["cpu_model"],
                      task={"name": "quick", "global_batch": 64 * world, "precision": precision, "model": "small-cnn",
                            "dataset": "digits", "scaling": "weak"},
                      throughput={"median": median, "ci_low": median * 0.98, "ci_high": median * 1.02,
                                  "windows": windows},
                      per_device_throughput=median / world, test_accuracy=0.9, **fields)


def folder(path: Path, rows: list) -> Path:
    store = ResultStore(path)
    for r in rows:
        store.append(r)
    return path


@pytest.fixture
def two(tmp_path):
    """A CPU box and a GPU box: torch-ddp on 1 and 2 devices and accelerate on 1 on both; tf-single on the CPU's."""
    cpu = folder(tmp_path / "cpu-box", [row("torch-ddp", 1, 1000.0, XEON), row("accelerate", 1, 500.0, XEON),
                                        row("torch-ddp", 2, 1600.0, XEON), row("tf-single", 1, 1100.0, XEON)])
    gpu = folder(tmp_path / "gpu-box", [row(v, n, x, A100, "cuda", "bf16") for v, n, x in (
        ("torch-ddp", 1, 40_000.0), ("accelerate", 1, 36_000.0), ("torch-ddp", 2, 76_000.0))])
    return cpu, gpu


def test_each_machine_is_named_by_its_recorded_environment(two):
    cpu, gpu = compare.machines(list(two))
    assert cpu.name == "Intel Xeon Gold 6338 CPU, 8 cores"
    assert gpu.name == "4x NVIDIA A100-SXM4-40GB"
    described = compare.describe(gpu)
    assert "NVIDIA A100-SXM4-40GB" in described["GPU"] and "AMD EPYC 7763, 64 cores" == described["CPU"]
    assert described["task, precision"] == "quick (small-cnn, digits), bf16, weak scaling"


def test_the_same_folder_twice_as_machines_keeps_them_apart_by_folder(tmp_path, two):
    cpu, _ = two
    again = folder(tmp_path / "cpu-box-tuesday", [row("torch-ddp", 1, 900.0, XEON)])
    names = [m.name for m in compare.machines([cpu, again])]
    assert names == ["Intel Xeon Gold 6338 CPU, 8 cores (cpu-box)",
                     "Intel Xeon Gold 6338 CPU, 8 cores (cpu-box-tuesday)"]


def cell(table, variant: str, devices: str, header_end: str, machine: str) -> str:
    [line] = table[(table["variant"] == variant) & (table["devices"] == devices)].to_dict("records")
    return line[f"{machine}: {header_end}"]


def test_a_configuration_on_both_machines_is_one_row_with_both_figures(two):
    found = compare.machines(list(two))
    cols = compare.columns(found)
    shared = compare.task_table("quick", cols, shared=True)
    only = compare.task_table("quick", cols, shared=False)
    assert sorted(zip(shared["variant"], shared["devices"])) == [("accelerate", "1"), ("torch-ddp", "1"),
                                                                 ("torch-ddp", "2")]
    cpu, gpu = (c.label for c in cols)
    # Throughput per device, with its interval: 2 devices' 1,600 samples/s are 800 a device.
    assert cell(shared, "torch-ddp", "2", "samples/s a device", cpu) == "800 [784, 816]"
    assert cell(shared, "torch-ddp", "2", "samples/s a device", gpu) == "38,000 [37,240, 38,760]"
    assert cell(shared, "torch-ddp", "1", "test acc.", gpu) == "0.9000"
    # What ran on one machine only is in the other table, without the other machine's columns.
    assert list(only["variant"]) == ["tf-single"] and not any(gpu in h for h in only.columns)


def test_ratios_are_within_a_machine_never_across(two):
    cols = compare.columns(compare.machines(list(two)))
    table = compare.task_table("quick", cols, shared=True)
    cpu, gpu = (c.label for c in cols)
    # On the CPU box tf-single (1,100) is the fastest at 1 device: torch-ddp is 1000/1100 of it, accelerate 500/1100.
    assert cell(table, "torch-ddp", "1", "x fastest", cpu).startswith("0.91 [")
    assert cell(table, "accelerate", "1", "x fastest", cpu).startswith("0.45 [")
    # On the GPU box torch-ddp is its own fastest, accelerate 36,000 / 40,000 of it; 2 devices against 2 devices.
    assert cell(table, "torch-ddp", "1", "x fastest", gpu) == "fastest"
    assert cell(table, "accelerate", "1", "x fastest", gpu).startswith("0.90 [")
    assert cell(table, "torch-ddp", "2", "x fastest", gpu) == "fastest"
    ratios = [float(c.split(" ")[0]) for h in table.columns if h.endswith("x fastest") for c in table[h]
              if c != "fastest"]
    assert all(0.4 < x <= 1.0 for x in ratios)  # 40 (GPU over CPU) or 0.025 would be a ratio across machines


def test_the_report_states_each_machines_task_and_what_differs(two, tmp_path):
    path = compare.write(list(two), tmp_path / "out")
    text = path.read_text()
    assert "precision (fp32 · bf16)" in text and "Figures side by side are each machine's own" in text
    assert "Energy per sample: no row of these folders recorded one" in text
    assert (tmp_path / "out" / "compare.html").read_text().count("<table") == 3  # machines, shared, one machine


def test_a_price_per_machine_gives_samples_per_dollar_and_recorded_energy_its_column(two, tmp_path):
    cpu, _ = two
    gpu = folder(tmp_path / "gpu-energy", [row("torch-ddp", 1, 40_000.0, A100, "cuda", "bf16",
                                               timeseries={"energy_j_per_sample": 0.0075})])
    cols = compare.columns(compare.machines([cpu, gpu], [0.5, 4.0]))
    table = compare.task_table("quick", cols, shared=True)
    cpu_label, gpu_label = (c.label for c in cols)
    # 1,000 samples/s at $0.50 an hour: 7.2 M samples a dollar; 40,000 at $4: 36 M.
    assert cell(table, "torch-ddp", "1", "M samples / $", cpu_label) == "7.2"
    assert cell(table, "torch-ddp", "1", "M samples / $", gpu_label) == "36"
    assert cell(table, "torch-ddp", "1", "J / sample", gpu_label) == "0.0075"
    assert not any(h == f"{cpu_label}: J / sample" for h in table.columns)


@pytest.mark.parametrize("args,message", [
    (["results/reference-cpu"], "needs two or more results folders"),
    (["results/reference-cpu", "{empty}"], "holds no results"),
    (["results/reference-cpu", "results/reference-cpu/"], "is given more than once"),
    (["results/reference-cpu", "results/reference-h100-default", "--price-per-device-hour", "0.1"],
     "has 1 prices for 2 folders"),
])
def test_bad_input_is_one_line_exit_2(tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    result = cli("compare", *[a.replace("{empty}", str(tmp_path / "empty")) for a in args],
                 "--out", str(tmp_path / "out"))
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and message in errors[0]
    assert not (tmp_path / "out").exists()


def test_the_committed_cpu_and_h100_references_side_by_side(tmp_path):
    result = cli("compare", "results/reference-cpu", "results/reference-h100-default", "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    text = (tmp_path / "compare.md").read_text()
    assert text in result.stdout
    for words in ("| AMD EPYC, 2 cores", "| NVIDIA H100 80GB HBM3 ", "Intel Xeon Processor, 16 cores",
                  "results/reference-h100-default", "precision (fp32 · bf16)", "window_steps (20 · 40)"):
        assert words in text, words
    shared = text[text.index("### On more than one machine"):text.index("### On one machine only")]
    # torch-dp on one device: the CPU's figure and the H100's (its fastest there) in one row.
    [torch_dp] = [line for line in shared.splitlines() if line.startswith("| torch-dp ")]
    assert "3,065 [2,824, 3,452]" in torch_dp and "56,348 [53,758, 58,939]" in torch_dp and "fastest" in torch_dp
    assert "tf-single" not in shared  # the H100 had no TensorFlow
    assert (tmp_path / "compare.html").exists() and (REPO / "results/reference-cpu/report.md").exists()
