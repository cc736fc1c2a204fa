"""The torch variants under Ray, Spark and Dask (and torchrun's machinery as a function API): the same
training as torchrun, every rank's value back, a failing rank named, nothing left running, and no
socket listening beyond loopback."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest

from bench.run.processes import RUN_ID_ENV, processes_of_run
from helpers import REPO, bench, bench_with_own_shm, cli, rows
from listening import ListenerWatch


ENGINES = ("torchrun", "dask", "ray", "spark")
# Ray's servers (gcs_server, raylet, core workers) and Spark's (TorchDistributor's own torchrun agent,
# its Python daemon in cluster mode) bind every interface whatever dtbench asks; see the README.
LOOPBACK_ENGINES = ("torchrun", "dask")


def api_call(engine: str, what: str, marker: str | None = None) -> tuple[subprocess.CompletedProcess, str]:
    """`bench.engines.run` in a fresh interpreter, marked so that its leftovers can be found."""
    marker = marker or f"api-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, RUN_ID_ENV: marker, "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-m", "tests.engine_functions", engine, what], cwd=REPO,
                            env=env, capture_output=True, text=True, timeout=300)
    return result, marker


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_function_api_returns_every_ranks_value(engine):
    marker = f"api-{uuid.uuid4().hex[:8]}"
    with ListenerWatch(marker) as watch:
        result, marker = api_call(engine, "report", marker)
    assert result.returncode == 0, result.stderr[-3000:]
    values = json.loads(result.stdout.strip().splitlines()[-1])["values"]
    assert [v["rank"] for v in values] == [0, 1]
    assert all(v["world"] == 2 and v["backend"] == "gloo" and v["env_rank"] == v["rank"] for v in values)
    assert [v["sum"] for v in values] == [(10 + 11) * 2.0] * 2  # args, kwargs and a real all-reduce
    assert processes_of_run(marker) == []
    if engine in LOOPBACK_ENGINES:
        assert watch.seen and watch.beyond_loopback() == set(), watch.seen  # the call's own listeners, seen


@pytest.mark.slow
@pytest.mark.parametrize("engine", ENGINES)
def test_a_rank_that_raises_fails_the_call_with_its_error(engine):
    result, marker = api_call(engine, "fail")  # the timeout of api_call is the "no hang" check
    assert result.returncode == 3, result.stderr[-3000:]
    failure = json.loads(result.stdout.strip().splitlines()[-1])
    assert failure["rank"] == 1
    assert "rank one was told to fail" in failure["error"]
    assert processes_of_run(marker) == []


@pytest.mark.slow
@pytest.mark.parametrize("engine", LOOPBACK_ENGINES)
def test_the_first_failing_rank_is_named_when_a_peer_fails_after_it(engine):
    # torchrun stamps failures to the second and keeps the lowest rank on a tie: rank 0's later error
    # would hide rank 1's, the cause.
    result, marker = api_call(engine, "fail-both")
    assert result.returncode == 3, result.stderr[-3000:]
    failure = json.loads(result.stdout.strip().splitlines()[-1])
    assert (failure["rank"], "rank one was told to fail" in failure["error"]) == (1, True)
    assert processes_of_run(marker) == []


@pytest.mark.slow
def test_a_killed_rank_is_named_not_the_peer_whose_collective_broke():
    # torchrun only: Dask restarts a killed worker and hands back the peer's error (see the README).
    result, marker = api_call("torchrun", "kill")
    assert result.returncode == 3, result.stderr[-3000:]
    failure = json.loads(result.stdout.strip().splitlines()[-1])
    assert failure["rank"] == 1, failure
    assert processes_of_run(marker) == []


# What each engine's (and launcher's) run that ended well left in its own /dev/shm (helpers.bench_with_own_shm),
# by the test that ran it; checked last.
LEFT_IN_SHM: dict[str, list[str] | None] = {}


@pytest.fixture(scope="module")
def torchrun_row(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("torchrun")
    with ListenerWatch(out) as watch:
        result, LEFT_IN_SHM["torchrun"] = bench_with_own_shm("run", "--variant", "torch-ddp", "--devices", "2",
                                                              "--task", "quick", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = rows(out)
    # torchrun's rendezvous store is hosted on 127.0.0.1 (torch's own would listen on every interface).
    assert watch.seen and watch.beyond_loopback() == set(), watch.seen  # the run's own listeners, seen
    assert row["engine"] == "torchrun"
    return row


ENGINE_RUNS = [("dask", ()), ("ray", ()), ("spark", ()),
               ("spark", ("--spark-master", "local-cluster[2,1,1024]"))]


@pytest.mark.slow
@pytest.mark.parametrize("engine,extra", ENGINE_RUNS, ids=["dask", "ray", "spark-local", "spark-cluster"])
def test_engine_trains_exactly_as_torchrun(engine, extra, out, torchrun_row):
    with ListenerWatch(out) as watch:
        result, LEFT_IN_SHM[" ".join((engine, *extra))] = bench_with_own_shm(
            "run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--engine", engine, *extra,
            "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert (row["engine"], row["launcher"], row["world_size"]) == (engine, engine, 2)
    # Same seed, data order and all-reduce: the same training, to float tolerance.
    assert row["test_loss"] == pytest.approx(torchrun_row["test_loss"], rel=1e-5)
    assert row["test_accuracy"] == torchrun_row["test_accuracy"]
    assert row["eval_samples"] == 397
    assert row["throughput"]["median"] > 0 and row["startup_s"] > 0 and row["wall_s"] > row["startup_s"]
    assert f"bench.engines.driver --spec" in row["command"] and f"--engine {engine}" in row["command"]
    assert sorted(row["environment"]["cores"]) == ["0", "1"]
    assert processes_of_run(row["run_id"]) == []
    if engine in LOOPBACK_ENGINES:
        assert watch.seen and watch.beyond_loopback() == set(), watch.seen  # the run's own listeners, seen


@pytest.mark.slow
def test_accelerate_runs_on_an_engine(out):
    result, LEFT_IN_SHM["accelerate on dask"] = bench_with_own_shm(
        "run", "--variant", "accelerate", "--devices", "2", "--task", "quick", "--engine", "dask", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    [row] = rows(out)
    assert row["status"] == "ok", row["error"]
    assert row["engine"] == "dask" and row["environment"]["distributed_type"] == "DistributedType.MULTI_CPU"
    assert row["eval_samples"] == 397


@pytest.mark.slow
def test_a_crashing_rank_fails_the_engine_run_with_its_error(out):
    result = bench("run", "--variant", "torch-ddp", "--devices", "2", "--task", "quick", "--engine", "dask",
                   "--timeout", "240", "--out", str(out), env={"DTBENCH_FAULT": "crash:rank=1:step=3"})
    assert result.returncode == 1
    [row] = rows(out)
    assert row["status"] == "failed"
    assert "rank 1: RuntimeError: injected crash at step 3" in row["error"]
    assert processes_of_run(row["run_id"]) == []


@pytest.mark.slow
def test_a_run_that_ends_well_leaves_dev_shm_as_it_found_it_under_every_engine():
    """The runs above (torchrun, Dask, Ray, Spark local and cluster, Accelerate's launch under Dask), each with a
    /dev/shm of its own: no named semaphore or segment outlives a run that ended well."""
    if any(left is None for left in LEFT_IN_SHM.values()):
        pytest.skip("a /dev/shm of a run's own is a mount namespace, which needs root")
    assert set(LEFT_IN_SHM) == {"torchrun", "dask", "ray", "spark", "spark --spark-master local-cluster[2,1,1024]",
                                "accelerate on dask"}, "run the module: the runs are its tests above"
    assert {engine: left for engine, left in LEFT_IN_SHM.items() if left} == {}


@pytest.mark.parametrize("args,message", [
    (("--variant", "tf-mirrored", "--engine", "ray"), "runs only under its own launcher"),
    (("--variant", "torch-ddp", "--engine", "slurm"), "unknown engine 'slurm'"),
    (("--variant", "torch-ddp", "--engine", "dask,ray"), "bench run takes one --engine"),
    (("--variant", "torch-ddp", "--engine", "dask", "--nodes", "2", "--devices", "2", "--node-rank", "0",
      "--master-port", "29500"), "drop --node-rank"),
])
def test_engine_requests_that_cannot_run_are_refused(args, message, out):
    result = cli("run", *args, "--task", "quick", "--out", str(out))
    assert result.returncode == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert rows(out) == []


def test_a_sweep_naming_a_variant_no_engine_runs_is_refused(out):
    result = cli("sweep", "--variants", "torch-ddp,tf-mirrored", "--engine", "torchrun,ray", "--max-devices", "1",
                 "--task", "quick", "--no-analysis", "--out", str(out))
    assert result.returncode == 2
    assert "tf-mirrored runs only under its own launcher: --engine ray runs torch-ddp, accelerate" in result.stderr
    assert rows(out) == []
