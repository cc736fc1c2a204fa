"""Which kernels ran, the fast-path audit's verdict on each switch, the wall-time split and the sweep's clock
(nothing trains here)."""
import json
import statistics

import pytest

from bench.analysis import fast_path

from bench.report import report
from bench.results import ResultStore
from bench.results.fast_path import off_the_fast_path
from bench.run import fold
from bench.results.jsonl import append_line
from bench.sweep.forecast import Forecast, earlier_rows
from bench.run.runspec import RunSpec
from bench.spec.rank_record import Checkpoint, Epoch, FirstStep, Result
from bench.spec.task import get_task
from bench.spec.variants import get_variant
from bench.worker import kernels
from bench.analysis.folder import Folder
from helpers import result_row
from test_report import row as report_row

EPYC_FLAGS = set("fpu sse4_2 avx avx2 fma f16c".split())
SAPPHIRE_RAPIDS_FLAGS = EPYC_FLAGS | set("avx512f avx512bw avx512_vnni avx512_bf16 amx_tile amx_bf16".split())
TF_ON = {"cpu_isa": ["sse4_2", "avx", "avx2", "fma"], "onednn": True, "onednn_switch": "1", "onednn_default": False,
         "as_shipped": False}
TORCH = {"cpu_isa": ["sse4_2", "avx", "avx2", "fma"], "cpu_dispatch": "AVX2", "onednn": True, "mkl": True,
         "blas": "mkl", "openmp": True, "as_shipped": False}


def test_tensorflow_picks_onednn_by_itself_only_on_cpus_with_vnni_or_amx(monkeypatch):
    monkeypatch.setattr(kernels, "is_x86", lambda: True)
    assert kernels.instruction_sets(EPYC_FLAGS) == ["sse4_2", "avx", "avx2", "fma"]
    assert not kernels.tf_onednn_on_by_default(EPYC_FLAGS)
    assert kernels.tf_onednn_on_by_default(SAPPHIRE_RAPIDS_FLAGS)
    assert kernels.cpu_flags("processor : 0\nflags\t\t: fpu avx2 fma\n") == {"fpu", "avx2", "fma"}


def audit_row(chosen: bool, on: list[float], off: list[float]) -> dict:
    pairs = [a / b for a, b in zip(on, off)]
    return {"framework": "torch", "switch": "channels_last", "variant": "torch-single", "env": "DTBENCH_CHANNELS_LAST",
            "chosen": chosen, "on": on, "off": off, "ratio": statistics.median(pairs), "ratio_low": min(pairs),
            "ratio_high": max(pairs), "errors": []}


def test_a_vms_cpu_name_is_told_apart_by_its_family_and_model(monkeypatch):
    import bench.worker

    # A cloud VM names every EPYC generation alike: the rows, the audit's fingerprint and the history's machines
    # would pool a Zen 2 with a Zen 4.
    zen2 = "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 23\nmodel\t\t: 49\nmodel name\t: AMD EPYC\n"
    zen4 = zen2.replace("23", "25").replace("49", "17")
    monkeypatch.setattr(bench.worker, "microarchitecture", lambda: None)
    assert bench.worker.cpu_model(zen2) == "AMD EPYC, family 23 model 49"
    assert bench.worker.cpu_model(zen2) != bench.worker.cpu_model(zen4)
    monkeypatch.setattr(bench.worker, "microarchitecture", lambda: "zen2")
    assert bench.worker.cpu_model(zen2 + "\nprocessor\t: 1\nmodel\t\t: 99\n") == "AMD EPYC, zen2, family 23 model 49"


@pytest.mark.parametrize("chosen, on, off, named", [
    (False, [8000, 8100], [6000, 6200], True),    # off, and on was faster in both pairs: named
    (False, [8000, 6000], [6000, 6200], False),   # the pairs disagree: too noisy to name
    (True, [8000, 8100], [6000, 6200], False),    # dtbench's setting is the faster one
    (True, [5000, 5100], [6000, 6200], True),     # on, and off was faster in both pairs
    (False, [6100, 6150], [6000, 6000], False),   # within the 5 % a switch must move
])
def test_the_audit_names_a_switch_only_where_both_pairs_say_the_other_setting_is_faster(chosen, on, off, named):
    words = off_the_fast_path(audit_row(chosen, on, off))
    assert bool(words) is named
    if named:
        assert ("DTBENCH_CHANNELS_LAST=1" if not chosen else "DTBENCH_CHANNELS_LAST=0") in words


def test_the_report_header_lists_each_frameworks_kernels_and_the_audit(tmp_path):
    store = ResultStore(tmp_path)
    store.append(report_row("torch-ddp", 1, 5000.0).__class__(**{
        **report_row("torch-ddp", 1, 5000.0).to_dict(), "environment": {"kernels": TORCH},
        "fast_path": {"channels_last": False, "compile": False}}))
    store.append(report_row("tf-mirrored", 1, 8000.0, framework="tensorflow-cpu").__class__(**{
        **report_row("tf-mirrored", 1, 8000.0, framework="tensorflow-cpu").to_dict(),
        "environment": {"kernels": TF_ON}, "fast_path": {"onednn": True, "compile": False}}))
    (tmp_path / "fast_path.jsonl").write_text(json.dumps(audit_row(False, [8000, 8100], [6000, 6200])) + "\n")
    text = report.write_report(Folder.read(tmp_path)).read_text()
    assert "kernels, PyTorch (dtbench's fast path): AVX2 dispatch; oneDNN on; BLAS mkl; channels_last off" in text
    assert ("kernels, TensorFlow (dtbench's fast path): oneDNN on (TF_ENABLE_ONEDNN_OPTS=1; TensorFlow's default "
            "on this CPU: off)") in text
    assert "## Fast path on this machine" in text and "8,000 / 8,100" in text
    # The verdict names the switch the runs had off although it was faster here.
    verdict = text[text.index("## Verdict"):text.index("## Fast path")]
    assert "Off the fast path: channels_last was off, and torch-single trained 1.32x faster with it on" in verdict


def test_a_tensorflow_run_as_shipped_without_onednn_is_flagged():
    shipped = report_row("tf-mirrored", 1, 8000.0, framework="tensorflow-cpu").to_dict()
    shipped.update(as_shipped=True, environment={"kernels": {**TF_ON, "onednn": False, "onednn_switch": "unset",
                                                              "as_shipped": True}})
    [warning] = fast_path.warnings([shipped], [])
    assert warning.startswith("TensorFlow ran as shipped, without its oneDNN kernels")
    assert "oneDNN off (Eigen kernels) (TF_ENABLE_ONEDNN_OPTS unset" in fast_path.kernel_lines([shipped])[0]


def test_the_wall_time_split_adds_up_to_the_wall_time():
    t0 = 1000.0
    def result(rank: int, at: float) -> Result:
        return Result(rank=rank, time=at, window_seconds=[1.0], window_steps=1, samples_per_window=1, train_s=10.0,
                      peak_memory_mb=1.0)

    records = {0: [FirstStep(time=t0 + 7), Epoch(time=t0 + 17, epoch=1, train_s=10.0, eval_s=0.8),
                   Checkpoint(time=t0 + 17.5, epoch=1, save_s=0.4, load_s=0.1, bytes=1), result(0, t0 + 18)],
               1: [FirstStep(rank=1, time=t0 + 7.5), result(1, t0 + 18.2)]}
    split = fold.wall_split(records, [0, 1], t0, 20.0, train_s=10.0, first_step_s=1.5)
    assert split["startup"] == pytest.approx(7.5) and split["training"] == pytest.approx(8.5)
    assert split["evaluation"] == pytest.approx(0.8) and split["checkpoints"] == pytest.approx(0.5)
    assert split["teardown"] == pytest.approx(1.8)
    assert sum(split.values()) == pytest.approx(20.0)


def spec(variant: str, devices: int = 1, **task) -> RunSpec:
    return RunSpec(get_variant(variant), get_task("default", **task), "cpu", 1, devices)


def test_the_sweeps_clock_prices_each_run_by_the_closest_runs_measured():
    forecast = Forecast()
    plan = [spec("torch-single"), spec("tf-single"), spec("torch-ddp", 2), spec("tf-mirrored", 2),
            spec("tf-multiworker", 2), spec("torch-dp", 2)]  # torch-dp on 2 CPU slots: skipped, costs nothing
    assert forecast.remaining(plan) is None  # nothing measured: no figure rather than a made-up one
    forecast.add(plan[0], 10.0)
    assert forecast.remaining(plan[1:]) == pytest.approx(40.0)  # every run priced like the one run seen
    forecast.add(plan[1], 30.0)
    # TensorFlow's runs priced by TensorFlow's, PyTorch's by PyTorch's: not by the mean of both.
    assert forecast.remaining(plan[2:]) == pytest.approx(10.0 + 30.0 + 30.0 + 0.0)
    forecast.add(plan[3], 50.0)
    # tf-multiworker on 2 slots, not met yet: priced like TensorFlow on 2 slots (tf-mirrored), not like tf-single.
    assert forecast.cost(plan[3]) == 50.0 and forecast.cost(plan[4]) == pytest.approx(50.0)


def test_a_result_is_seen_once_written_whole_however_the_file_was_read(tmp_path):
    """The harness polls each rank's file while it grows: a result line read in two halves still counts, a
    rank with no result yet keeps the run waiting."""
    watch = fold.ResultWatch(tmp_path, [0, 1])
    assert not watch()  # no files yet
    line = json.dumps({"event": "result", "rank": 0, "time": 1.0, "windows": [1] * 50}) + "\n"
    (tmp_path / "rank0.jsonl").write_text('{"event": "joined"}\n' + line[:10])
    (tmp_path / "rank1.jsonl").write_text('{"event": "loss", "loss": "result"}\n')
    assert not watch()
    with open(tmp_path / "rank0.jsonl", "a") as f:
        f.write(line[10:])
    assert not watch()  # rank 1 has not recorded its result
    with open(tmp_path / "rank1.jsonl", "a") as f:
        f.write(line.replace('"rank": 0', '"rank": 1'))
    assert watch()


def test_processes_still_running_after_every_result_are_stopped_and_named(tmp_path):
    """A rank whose process lingers after its result (TensorFlow destroying its tf.data iterator) costs the run
    RESULT_GRACE_S, not its whole teardown, and the run is ok with the process named."""
    import subprocess
    import sys
    import time

    from bench.run import processes

    lingering = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        started = time.time()
        status, reason = processes.wait([lingering], started, 120, [tmp_path / "node0.log"], reported=lambda: True)
        waited = time.time() - started
    finally:
        lingering.kill()
        lingering.wait()
    assert status == "ok" and reason.startswith("node0 still running") and "stopped" in reason
    assert processes.RESULT_GRACE_S <= waited < processes.RESULT_GRACE_S + 10


def earlier(variant: str, world: int, seconds: float) -> dict:
    framework = "tensorflow-cpu" if variant.startswith("tf-") else "torch"
    row = result_row(variant, world, framework=framework, wall_s=seconds,
                     task=spec(variant, world).task.to_dict()).to_dict()
    return {**row, "engine": spec(variant, world).row_engine}


def test_the_sweeps_clock_borrows_the_earlier_rows_shape_at_todays_scale():
    """tf-ps, not met yet, cost three times tf-single in the reference: today it is priced at three times what
    tf-single cost today, whatever the reference's machine took."""
    forecast = Forecast([earlier("tf-single", 1, 10.0), earlier("tf-ps", 1, 30.0), earlier("tf-mirrored", 1, 10.0)])
    forecast.add(spec("tf-single"), 25.0)
    assert forecast.cost(spec("tf-ps")) == pytest.approx(25.0 * 30.0 / 10.0)
    assert forecast.cost(spec("tf-mirrored")) == pytest.approx(25.0)
    assert forecast.cost(spec("tf-single")) == 25.0


def test_before_any_run_the_estimate_is_the_earlier_rows_own_and_another_tasks_rows_price_nothing(tmp_path):
    forecast = Forecast([earlier("tf-single", 1, 10.0), earlier("tf-single", 1, 20.0), earlier("tf-ps", 1, 30.0)])
    assert forecast.estimate(spec("tf-single")) == (pytest.approx(15.0), True)
    assert forecast.estimate(spec("tf-mirrored")) == (pytest.approx(20.0), False)  # TensorFlow on one device
    assert forecast.estimate(spec("torch-ddp")) == (pytest.approx(20.0), False)  # no torch row: any run
    assert Forecast().estimate(spec("tf-single")) == (None, False)
    store = ResultStore(tmp_path)
    other_task = {**earlier("tf-single", 1, 99.0), "task": {"name": "quick", "global_batch": 64}}
    append_line(tmp_path / "results.jsonl", other_task)
    assert [r for r in earlier_rows([spec("tf-single")], store) if r["wall_s"] == 99.0] == []


def test_one_run_calibrates_every_configuration_the_earlier_rows_hold_to_this_machine():
    """torch-ddp took twice its earlier time today: every other configuration is priced at twice its own earlier
    cost (not at torch-ddp's), and one the earlier rows lack by the closest run measured."""
    forecast = Forecast([earlier("torch-ddp", 2, 20.0), earlier("tf-single", 1, 40.0), earlier("tf-ps", 1, 90.0)])
    assert forecast.scale() is None
    forecast.add(spec("torch-ddp", 2), 40.0)
    assert forecast.scale() == pytest.approx(2.0)
    assert forecast.cost(spec("tf-single")) == pytest.approx(80.0)
    assert forecast.cost(spec("tf-ps")) == pytest.approx(180.0)
    assert forecast.cost(spec("torch-fsdp", 2)) == pytest.approx(40.0)  # no earlier row: the closest run today
    assert forecast.remaining([spec("tf-single"), spec("tf-ps")]) == pytest.approx(260.0)


def test_a_sweep_states_its_length_up_front_from_the_earlier_rows_of_its_runs_and_its_audit(tmp_path):
    from bench.sweep.forecast import up_front

    append_line(tmp_path / "results.jsonl", earlier("torch-ddp", 2, 60.0))
    append_line(tmp_path / "results.jsonl", earlier("tf-single", 1, 120.0))
    said = up_front([spec("torch-ddp", 2), spec("tf-single")], [spec("tf-single")], tmp_path)
    assert said.startswith("Estimate: 2 runs and the fast-path audit's 1 run, about 5 min")
    assert said.endswith("recalibrated for this machine after its first run.")
    unknown_batch = spec("torch-ddp", 2, global_batch=72)  # no earlier row of this task
    assert "first run's line gives the first ETA" in up_front([unknown_batch], [], tmp_path / "empty")
