"""The scaling analysis end to end: the no-communication bound, the all-reduce benchmark (the efficiency against
the plain single-device loop: test_e2e_sweep.py)."""
import pytest

from bench.results import allreduce
from bench.studies import microbench
from bench.spec import devices
from helpers import CPU, bench, cli, rows


@pytest.mark.slow
def test_independent_run_is_the_no_sync_bound(out):
    result = bench("run", "--variant", "torch-ddp", "--devices", "2", "--independent", "--task", "quick",
                   "--out", str(out), env=CPU)
    assert result.returncode == 0, result.stderr
    [row] = rows(out)
    assert row["status"] == "ok" and row["independent"] is True
    assert row["throughput"]["median"] > 0 and row["test_accuracy"] is None


def test_independent_mode_is_refused_where_it_does_not_exist(out):
    result = cli("run", "--variant", "tf-mirrored", "--devices", "2", "--independent", "--task", "quick",
                 "--out", str(out), env=CPU)
    assert result.returncode == 2 and "no independent" in result.stderr


@pytest.mark.slow
def test_collective_microbenchmarks_on_two_processes(tmp_path, monkeypatch):
    """All-reduce, all-gather and reduce-scatter at every size, each with its bus factor; the all-reduce where
    the report's communication floor reads it, all three fitted."""
    from bench.results import collectives

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    measured = microbench.measure_collectives(tmp_path, devices.Machine(cores=(0, 1)), "cpu", 1, 2)
    sizes = sorted({r["size_bytes"] for r in measured})
    for name in ("all_reduce", "all_gather", "reduce_scatter"):
        mine = [r for r in measured if r["collective"] == name]
        assert [r["size_bytes"] for r in mine] == sizes and len(sizes) >= 6, name
        assert all(r["backend"] == "gloo" and r["world_size"] == 2 and r["busbw_gbps"] > 0 for r in mine)
        factor = 1.0 if name == "all_reduce" else 0.5  # 2(n-1)/n and (n-1)/n at n = 2
        assert all(r["busbw_gbps"] == pytest.approx(r["algbw_gbps"] * factor) for r in mine)
    assert allreduce.load(tmp_path) == [r for r in measured if r["collective"] == "all_reduce"]
    fitted = {f.collective: f for f in collectives.fits(collectives.load(tmp_path))}
    assert set(fitted) == {"all_reduce", "all_gather", "reduce_scatter"}
    assert all(f.alpha_s >= 0 and f.busbw > 0 for f in fitted.values())


