"""What each run did over time (bench.run.sampler): every run folder holds its samples and its plot, the row
their summary, and the figures agree with what the ranks measure of themselves."""
from __future__ import annotations

import json
import os
import time

import pandas as pd
import pytest

from bench.run import sampler
from bench.spec import devices
from bench.report import over_time
from bench.results.frame import frame
from helpers import CPU, bench, result_row, rows

GPUS = devices.discover().gpus


def rank_records(run_dir, rank: int) -> list[dict]:
    return [json.loads(line) for line in (run_dir / f"rank{rank}.jsonl").read_text().splitlines()]


@pytest.mark.slow
def test_every_run_has_its_time_series_plot_and_summary(tmp_path):
    done = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "default", "--epochs", "1",
                 "--sample-every", "0.5", "--out", str(tmp_path), env=CPU)
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = rows(tmp_path)
    [run_dir] = (tmp_path / "runs").iterdir()
    samples = pd.read_parquet(run_dir / sampler.FILE)
    ranks = samples[samples["kind"] == "rank"]
    assert sorted(ranks["index"].unique()) == [0, 1]
    assert 0.4 < ranks[ranks["index"] == 0]["t_s"].diff().median() < 0.9  # every half second
    summary = row["timeseries"]
    assert summary["ranks"] == [0, 1] and summary["samples"] >= 5
    # Each rank's slot as the rank itself reported it once pinned.
    assert summary["cores"] == [next(e["cores"] for e in rank_records(run_dir, r) if e["event"] == "joined")
                                for r in (0, 1)]
    # The sampled peak of each rank against the kernel's own peak (getrusage's ru_maxrss, reported by the rank):
    # never above it, and not far below (a sample every half second misses only short peaks).
    for rank, sampled in zip((0, 1), summary["peak_rss_mb"]):
        kernel_peak = next(e["peak_memory_mb"] for e in rank_records(run_dir, rank) if e["event"] == "result")
        assert 0.7 * kernel_peak < sampled <= 1.02 * kernel_peak, (rank, sampled, kernel_peak)
    assert all(cpu > 30 for cpu in summary["mean_cpu_pct"])  # each rank trains on its core
    assert summary["sampler_cpu_fraction"] < 0.05
    assert (run_dir / "timeseries.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert bench("report", str(tmp_path)).returncode == 0
    assert f"runs/{run_dir.name}/timeseries.png" in (tmp_path / "report.md").read_text()  # linked from the report


@pytest.mark.slow
def test_a_failed_run_keeps_what_it_did_until_it_failed(tmp_path):
    done = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "default", "--epochs", "1",
                 "--sample-every", "0.5", "--out", str(tmp_path), env={**CPU, "DTBENCH_FAULT": "crash:rank=1:step=60"})
    [row] = rows(tmp_path)
    [run_dir] = (tmp_path / "runs").iterdir()
    assert done.returncode == 1 and row["status"] == "failed"
    assert row["timeseries"]["ranks"] == [0, 1] and (run_dir / "timeseries.png").exists()


@pytest.mark.slow
def test_every_run_is_sampled_by_default_and_zero_turns_it_off(tmp_path):
    for every in ([], ["--sample-every", "0"]):
        done = bench("run", "--variant", "torch-single", "--devices", "1", "--task", "quick", *every,
                     "--out", str(tmp_path), env=CPU)
        assert done.returncode == 0, done.stderr[-2000:]
    sampled, unsampled = rows(tmp_path)
    assert sampled["timeseries"]["interval_s"] == 0.5 and sampled["timeseries"]["ranks"] == [0]
    assert (tmp_path / "runs" / sampled["run_id"] / "timeseries.png").exists()
    assert unsampled["timeseries"] is None
    assert not (tmp_path / "runs" / unsampled["run_id"] / sampler.FILE).exists()


def test_the_sampler_runs_only_when_a_core_has_nothing_else_to_do(tmp_path):
    series = sampler.Sampler([os.getpid()], True, tmp_path, 0.05).start()
    try:
        while not series.ticks:  # the thread sets its class before its first tick
            time.sleep(0.01)
        policy = os.sched_getscheduler(series._thread.native_id)
    finally:
        series.stop()
    assert policy == os.SCHED_IDLE  # its ticks never preempt a rank
    assert os.sched_getscheduler(0) == os.SCHED_OTHER  # the agent's other threads keep their class


def test_the_summary_of_known_samples(tmp_path):
    rows_ = [(t, "core", core, None, None, busy, None, None, None, None)
             for t in (0.5, 1.0) for core, busy in ((0, 100.0), (1, 20.0))]
    rows_ += [(0.5, "rank", 0, 100.0, 90.0, None, None, None, None, None),
              (1.0, "rank", 0, 300.0, 70.0, None, None, None, None, None),
              (0.5, "gpu", 0, None, None, None, 50.0, 1000.0, 200.0, 1500.0),
              (1.0, "gpu", 0, None, None, None, 100.0, 3000.0, 300.0, 1500.0)]
    frame = pd.DataFrame(rows_, columns=sampler.COLUMNS)
    summary = sampler.summary(frame, {0: [0]}, 0.5, 2, 0.004)
    assert summary["peak_rss_mb"] == [300.0] and summary["mean_cpu_pct"] == [80.0]
    assert summary["mean_slot_busy_pct"] == [100.0]  # core 0 only: the other core's 20 % is another slot's
    assert summary["gpu_mean_util_pct"] == [75.0] and summary["gpu_peak_mem_mb"] == [3000.0]
    assert summary["gpu_energy_j"] == 250.0  # (200 W + 300 W) x 0.5 s
    late = frame.assign(t_s=frame["t_s"].replace(1.0, 1.5))  # a tick the machine delayed by half a second
    assert sampler.summary(late, {0: [0]}, 0.5, 2, 0.004)["gpu_energy_j"] == 400.0  # 200 W x 0.5 s + 300 W x 1 s
    frame.to_parquet(tmp_path / sampler.FILE)
    # From the first step's end (0.75 s) on, 300 W over 1,000 samples/s: 0.3 J a sample.
    assert sampler.energy_per_sample(tmp_path / sampler.FILE, 0.75, 1000.0) == pytest.approx(0.3)


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not GPUS, reason="needs a CUDA GPU: nvidia-smi finds none here")
def test_on_a_gpu_the_device_is_sampled_with_its_energy_per_sample(tmp_path):
    done = bench("run", "--variant", "torch-ddp", "--devices", "1", "--task", "default", "--epochs", "1",
                 "--sample-every", "0.5", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    [row] = rows(tmp_path)
    summary = row["timeseries"]
    assert summary["gpus"] == [int(GPUS[0])] and summary["gpu_mean_util_pct"][0] > 0
    assert summary["gpu_peak_mem_mb"][0] >= row["peak_memory_mb"]  # the device holds at least what torch reserved
    assert 0 < summary["energy_j_per_sample"] < 1


def test_the_report_shows_one_figure_where_ranks_differ_below_its_last_digit(tmp_path):
    summary = {"ranks": [0, 1], "peak_rss_mb": [689.6, 690.2], "mean_cpu_pct": [37.0, 41.0],
               "mean_slot_busy_pct": [86.0, 86.0], "sampler_cpu_fraction": 0.0016}
    runs = frame([result_row(world=2, timeseries=summary).to_dict()])
    [line] = over_time.table(runs, tmp_path).to_dict("records")
    assert line["peak RSS / rank (MiB)"] == "690" and line["CPU / rank (% of a core)"] == "37–41"
    assert line["GPU util (%)"] == "-" and line["plot"] == "(run folder not here)"
