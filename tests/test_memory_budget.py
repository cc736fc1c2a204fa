"""--device-memory: every rank given the memory of a smaller device; which approaches fit, recorded and said."""
import json

import pytest

from bench.analysis import headline, verdict

from bench.report import memory_budget
from bench.analysis.repeats import measured_runs
from bench.metrics import memory
from bench.results import ResultStore, load
from bench.analysis import aggregate
from bench.status import Status
from helpers import CPU, cli, rows
from test_report import TASK, row

MODEL = "timm:vit_base_patch16_224"
REFUSED = ("rank 1 exited with code 1\nrank 1: RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried "
           "to allocate 353894400 bytes. Error code 12 (Cannot allocate memory)")


def under_budget(variant: str, median: float | None, gib: float = 2.0, zero_stage: int | None = None):
    fits = median is not None
    r = row(variant, 2, median or 0.0, status="ok" if fits else Status.DOES_NOT_FIT)
    r.task = {**TASK, "model": MODEL, "image_size": 32, "channels": 3, "device_memory_gib": gib,
              "zero_stage": zero_stage}
    r.run_id = f"{variant}-{zero_stage}-{gib}"
    if fits:
        r.task["params"] = 85_800_000
        r.memory = {"model_state_bytes": {"0": {"parameters": 172 * 2**20, "gradients": 172 * 2**20,
                                                 "optimizer": 172 * 2**20}}}
    else:
        r.task.pop("params", None)  # counted by a rank that built the model and trained
        r.error, r.memory = REFUSED, {"refused_allocation_mb": memory.refused_mb(REFUSED)}
    return r


@pytest.fixture
def folder(tmp_path):
    store = ResultStore(tmp_path)
    for r in (under_budget("torch-ddp", None), under_budget("torch-fsdp", 40.0),
              under_budget("deepspeed", 52.0, zero_stage=2), under_budget("deepspeed", None, zero_stage=1)):
        store.append(r)
    return tmp_path


def test_the_refused_allocation_is_read_from_each_allocators_message():
    assert memory.refused_mb(REFUSED) == pytest.approx(337.5)
    assert memory.refused_mb("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
                             "total capacity of 79.19 GiB") == 2048
    assert memory.refused_mb("ResourceExhaustedError: OOM when allocating tensor") is None


def test_the_verdict_says_which_approaches_fit_and_the_fastest_of_those(folder):
    runs = load(folder)
    configs = aggregate.configurations(runs)
    [(title, sentence)] = verdict.summary(configs, runs)[0]
    assert title.startswith("2 CPU slots of 2 GiB, default task (timm:vit_base_patch16_224 at 32px 3ch)")
    assert sentence.startswith("deepspeed (ZeRO-2) is fastest")
    assert sentence.endswith("torch-ddp (an allocation of 338 MiB refused) and deepspeed (ZeRO-1) (an allocation of "
                             "338 MiB refused) do not fit in 2 GiB a device; of the 2 that fit, deepspeed (ZeRO-2) "
                             "is fastest.")
    [(_, lines)] = headline.headlines(configs, measured_runs(runs))
    assert lines[0] == ("use deepspeed (ZeRO-2) (52 samples/s); does not fit in 2 GiB a device: torch-ddp, "
                        "deepspeed (ZeRO-1).")


def test_nothing_fitting_is_said_as_such(tmp_path):
    store = ResultStore(tmp_path)
    store.append(under_budget("torch-ddp", None, gib=1.0))
    runs = load(tmp_path)
    configs = aggregate.configurations(runs)
    [(_, sentence)] = verdict.summary(configs, runs)[0]
    assert sentence == "None fits in 1 GiB a device: torch-ddp (an allocation of 338 MiB refused) does not fit."
    assert headline.headlines(configs, measured_runs(runs))[0][1] == ["none fits in 1 GiB a device: torch-ddp."]


def test_the_report_tables_every_approach_under_the_budget_with_the_largest_batch_maxbatch_found(folder):
    (folder / "maxbatch").mkdir()
    series = aggregate.configurations(load(folder)).set_index("variant").loc["torch-fsdp", "series"]
    (folder / "maxbatch" / "maxbatch.jsonl").write_text(json.dumps(
        {"label": "x", "world_size": 2, "device_memory_gib": 2.0, "series": series, "largest_fitting": 96,
         "smallest_failing": 98, "probes": [], "error": None}) + "\n")
    cells = memory_budget.table(memory_budget.entries(aggregate.configurations(load(folder))),
                                memory_budget.params_by_model(aggregate.configurations(load(folder))),
                                memory_budget.largest_batches(folder))
    assert list(cells["approach"]) == ["deepspeed (ZeRO-2)", "torch-fsdp", "torch-ddp", "deepspeed (ZeRO-1)"]
    assert list(cells["fits"]) == ["yes", "yes", "no", "no"]
    assert list(cells["refused allocation (MiB)"]) == ["-", "-", "338", "338"]
    assert list(cells["largest batch"]) == ["-", "96", "-", "-"] and set(cells["params (M)"]) == {"85.8"}
    assert list(cells["model state / rank (MiB)"])[:2] == ["516", "516"]


def test_a_run_that_does_not_fit_is_done_for_resume_and_leaves_the_sweep_exit_0(folder):
    from bench.sweep import resume

    assert Status.DOES_NOT_FIT in resume.FINISHED
    assert [r["status"] for r in rows(folder)].count("does not fit") == 2


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_budget_that_is_no_memory_is_refused_in_one_line(tmp_path, value):
    done = cli("run", "--variant", "torch-ddp", "--task", "quick", "--device-memory", value, "--out", str(tmp_path),
               env=CPU)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "--device-memory" in done.stderr and "GiB" in done.stderr


def test_the_model_size_figure_marks_what_did_not_fit_on_the_floor_of_its_panel(folder):
    from bench.report import model_size

    small = under_budget("torch-ddp", 900.0)
    small.task.update(model="timm:resnet18", params=11_200_000)
    small.run_id = "small-ddp"
    fsdp_small = under_budget("torch-fsdp", 700.0)
    fsdp_small.task.update(model="timm:resnet18", params=11_200_000)
    fsdp_small.run_id = "small-fsdp"
    for r in (small, fsdp_small):
        ResultStore(folder).append(r)
    configs = aggregate.configurations(load(folder))
    assert model_size.unfit(configs) == {2: [(85_800_000.0, "torch-ddp"), (85_800_000.0, "deepspeed (ZeRO-1)")]}
    [png], _ = model_size.draw(configs, folder, "t")
    assert png.stat().st_size > 10_000
    # The line and bar plots of a sweep over models: each model's on its own, its approaches named without it.
    from bench.report import plots

    drawn = {p.name for p in plots.draw_all(configs, folder, "t")}
    assert {"t-timm_resnet18-throughput.png", "t-timm_vit_base_patch16_224-throughput.png"} <= drawn
    assert not any(name.startswith("t-throughput") for name in drawn)


def test_the_one_approach_that_fits_is_named_as_such(tmp_path):
    store = ResultStore(tmp_path)
    for r in (under_budget("torch-ddp", None), under_budget("torch-fsdp", 20.0)):
        store.append(r)
    runs = load(tmp_path)
    [(_, sentence)] = verdict.summary(aggregate.configurations(runs), runs)[0]
    assert sentence.endswith("torch-ddp (an allocation of 338 MiB refused) does not fit in 2 GiB a device; only "
                             "torch-fsdp does.")
