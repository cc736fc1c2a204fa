"""The scaling analysis end to end: baselines, the no-communication bound, the all-reduce benchmark."""
import pytest

from bench.results import allreduce
from bench.studies import microbench
from bench.spec import devices
from helpers import CPU, bench, configurations, rows


@pytest.mark.slow
def test_efficiency_against_the_plain_single_device_loop(out):
    result = bench("sweep", "--variants", "torch-ddp,torch-single", "--max-devices", "2", "--task", "quick",
                   "--no-analysis", "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    by_key = {(r["variant"], r["world_size"]): r for r in rows(out)}
    assert ("torch-single", 2) not in by_key  # a baseline runs on one device only
    assert by_key[("torch-single", 1)]["status"] == "ok"
    derived = {(k.variant, k.world_size): e for k, e in zip(*configurations(out, "scaling_efficiency_vs_single"))}
    assert derived[("torch-ddp", 2)] > 0


@pytest.mark.slow
def test_independent_run_is_the_no_sync_bound(out):
    result = bench("run", "--variant", "torch-ddp", "--devices", "2", "--independent", "--task", "quick",
                   "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok" and row["independent"] is True
    assert row["throughput"]["median"] > 0 and row["test_accuracy"] is None


def test_independent_mode_is_refused_where_it_does_not_exist(out):
    result = bench("run", "--variant", "tf-mirrored", "--devices", "2", "--independent", "--task", "quick",
                   "--out", str(out), env=CPU)
    assert result.returncode == 2 and "no independent" in result.stderr


@pytest.mark.slow
def test_allreduce_microbenchmark_on_two_processes(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    measured = microbench.measure_allreduce(tmp_path, devices.Machine(cores=(0, 1)), "cpu", 1, 2)
    assert [r["size_bytes"] for r in measured] == sorted(r["size_bytes"] for r in measured)
    assert all(r["backend"] == "gloo" and r["busbw_gbps"] > 0 and r["world_size"] == 2 for r in measured)
    assert allreduce.load(tmp_path) == measured
